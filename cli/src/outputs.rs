//! The files a command writes, under the library's rules for every output (`wgcompute::outputs`): checked
//! before any work starts, written all or none at the end. Here: what a command's results are encoded as.

use std::io::Write;

pub use wgcompute::outputs::{same_file, Outputs};

use crate::npy;

/// One result, waiting to be written.
pub enum Contents {
    F32(Vec<usize>, Vec<f32>),
    I64(Vec<usize>, Vec<i64>),
    /// A file in another format, already encoded (a safetensors checkpoint).
    Bytes(Vec<u8>),
}

impl wgcompute::outputs::Encode for Contents {
    fn encode(&self, mut writer: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Contents::F32(shape, data) => npy::write(&mut writer, shape, data),
            Contents::I64(shape, data) => npy::write(&mut writer, shape, data),
            Contents::Bytes(bytes) => writer.write_all(bytes),
        }
    }
}
