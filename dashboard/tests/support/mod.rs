// Each test file is its own crate and uses only part of this.
#![allow(dead_code)]

pub(crate) mod browser;
pub(crate) mod http;
pub(crate) mod page;
