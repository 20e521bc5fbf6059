//! The library's test helpers, the same file rather than a copy: its backends, seeded data, references and memory
//! lock, whose macros name `crate::common::…` and so find them here; and running the binary (cli).

// Most of them serve the library's tests only.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../../../../tests/all/common/mod.rs"]
mod library;

pub use library::*;

pub mod cli;
