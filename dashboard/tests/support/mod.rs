pub(crate) mod browser;
