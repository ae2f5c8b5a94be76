//! The adaptive broadcast (placeholder doc, completed below).
mod learner;
