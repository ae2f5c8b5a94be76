//! The launcher library behind `mttlrun` and self-launch.
