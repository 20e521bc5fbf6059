//! The files a command writes, under the library's rules for every output (`wgcompute::outputs`): checked
//! before any work starts, written all or none at the end. Here: what a command's results are encoded as.

use std::io::Write;
use std::path::Path;

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

/// `Outputs::plan`, after refusing each target that exists and is neither a regular file nor a folder by what
/// it is, in the library's words. The library resolves a target's links before it looks at what the target
/// is, and `/dev/stdout` while standard output is a pipe resolves to nothing (the link `/proc/self/fd/1` reads
/// `pipe:[…]`, which names no file), so it would report "No such file or directory" rather than the cause.
/// The status of the path, links followed, is that of the pipe or terminal itself.
pub fn plan(outputs: &[(String, &Path)], inputs: &[(String, &Path)]) -> anyhow::Result<Outputs> {
    for (option, path) in outputs {
        if let Ok(metadata) = std::fs::metadata(path) {
            if !metadata.is_file() && !metadata.is_dir() {
                let named = if option.is_empty() {
                    path.display().to_string()
                } else {
                    format!("{option} {}", path.display())
                };
                anyhow::bail!(
                    "cannot write {named}: it is {}, which is left as it is; outputs are regular files \
                     (written whole, then renamed into place), so name a file",
                    wgcompute::file_kind(&metadata.file_type())
                );
            }
        }
    }
    Ok(Outputs::plan(outputs, inputs)?)
}
