//! Reverse-mode automatic differentiation: a tape records the forward pass over the engine's ops, and
//! `backward` walks it in reverse, freeing each intermediate as soon as no later step of the walk needs it.
//!
//! Values on the tape are `Arc<Tensor>`: parameters are shared with the layers that own them, intermediates
//! belong to the tape alone. Like every tensor, none of them keeps GPU memory alive past its session.
//!
//! ```
//! use std::sync::Arc;
//! use wgcompute::{Session, SessionOptions, Tape};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! let w = Arc::new(session.randn(&[4, 3], 1)?);
//! let mut tape = Tape::new();
//! let x = tape.input(session.rand(&[2, 4], 2)?);
//! let labels = tape.input(session.rand(&[2, 3], 3)?);
//! let w_var = tape.param(&w);
//! let logits = tape.matmul(x, w_var)?;
//! let losses = tape.softmax_cross_entropy(logits, labels)?;
//! let cost = tape.mean(losses, None)?;
//! let grads = tape.backward(cost)?;
//! let dw = grads.of(&w).expect("w took part");
//! assert_eq!(dw.shape(), &[4, 3]);
//! # Ok(()) }
//! ```

mod array_api;
mod backward;
mod bridge;
mod gradient_tape;
mod neural;
mod rules;
mod tape;
mod walk;
mod window;

pub use crate::tensor::record::{Tape, Var};
pub use backward::Gradients;
pub use gradient_tape::GradientTape;
