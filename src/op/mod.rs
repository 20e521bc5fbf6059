//! The op vocabulary, at the bottom of the crate: which ops there are, their names, descriptions and table
//! rows, and how a matrix product reads its operands. Shape inference (`shape`), the kernels and the autograd
//! rules read these; none of them is imported here.

pub mod elementwise;
pub mod index;
pub mod logic;
pub mod matmul;
pub mod optim;
pub mod reduce;
pub mod softmax;
pub mod sort;
pub mod window;
