//! The postgres backend (work in progress).
