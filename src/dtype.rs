//! Element types: the one description of what a tensor's 4-byte elements mean, and how two of them combine.

/// Element types, each element one 4-byte word. Floating-point computation is in f32; u32 holds indices
/// (argmax) and labels; i32 is the signed integer type; a bool element is a word holding 0 (false) or 1 (true),
/// so that every kernel addresses every tensor by the same 4-byte elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    U32,
    I32,
    Bool,
}

/// A dtype's kind, as the Array API standard groups them: promotion stays within one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Integer,
    Float,
}

impl DType {
    /// Every dtype, in the order the promotion tests sweep them.
    pub const ALL: [DType; 4] = [DType::Bool, DType::I32, DType::U32, DType::F32];

    /// The standard's (and NumPy's) name: `float32`, `uint32`, `int32`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::U32 => "uint32",
            DType::I32 => "int32",
            DType::Bool => "bool",
        }
    }

    /// The dtype of that [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<DType> {
        Self::ALL.into_iter().find(|dtype| dtype.name() == name)
    }

    pub fn kind(self) -> Kind {
        match self {
            DType::Bool => Kind::Bool,
            DType::I32 | DType::U32 => Kind::Integer,
            DType::F32 => Kind::Float,
        }
    }

    pub fn is_integer(self) -> bool {
        self.kind() == Kind::Integer
    }

    /// The standard's type promotion of two array operands: equal dtypes give themselves; int32 with uint32
    /// would need int64, which tensors cannot hold; and promotion across kinds (bool with a number, an integer
    /// with a float) the standard leaves undefined. Those give None: an op refuses them with
    /// `Error::Promotion`, and `astype` says what the caller means.
    pub fn promoted(self, other: DType) -> Option<DType> {
        (self == other).then_some(self)
    }

    /// Whether `astype(self → to)` is a cast the standard's promotion allows (`can_cast`): to itself only, as
    /// no promotion joins two of these dtypes.
    pub fn can_cast(self, to: DType) -> bool {
        self.promoted(to) == Some(to)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
