//! Every public tensor operation: validate the operands, infer the output's shape, allocate it, call a kernel.
//! One module per op family, each an `impl Tensor` block.

pub(crate) mod creation;
mod elementwise;
pub(crate) mod index;
mod layout;
pub(crate) mod linear;
pub(crate) mod logic;
pub(crate) mod manipulate;
pub(crate) mod matmul;
pub(crate) mod neural;
pub(crate) mod optim;
mod random;
pub(crate) mod reduce;
mod softmax;
mod sort;
pub(crate) mod window;
