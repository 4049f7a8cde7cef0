//! # gpushmem — host runtime
//!
//! Allocates the symmetric heap on every PE, maps every peer's heap, installs
//! the device state into each loaded kernel module, and launches kernels.
#![warn(missing_docs)]

pub mod bootstrap;
mod config;
mod error;

pub use config::{parse_size, Config};
pub use error::{Error, Result};
