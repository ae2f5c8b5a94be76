//! mttl's runtime.
