//! Element types: the one description of what a tensor's 4-byte elements mean.

/// Element types. Computation is in f32; u32 holds indices (argmax) and labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    U32,
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::U32 => "u32",
        })
    }
}
