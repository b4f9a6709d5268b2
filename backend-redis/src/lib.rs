//! The redis backend (work in progress).
