//! Placeholder: replaced by the Unix-socket bootstrap.
