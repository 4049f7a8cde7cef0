//! Placeholder: replaced by the launcher-environment reader.
