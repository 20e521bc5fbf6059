//! How a matrix product reads its operands.

/// Which operands of a matrix product are read with their last two axes swapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transpose {
    /// `a · b`.
    #[default]
    Neither,
    /// `aᵀ · b` (a weight's gradient, xᵀ·dY).
    Left,
    /// `a · bᵀ`.
    Right,
    /// `aᵀ · bᵀ`.
    Both,
}

impl Transpose {
    /// From one flag per operand, as a command line gives them.
    pub fn from_flags(left: bool, right: bool) -> Self {
        match (left, right) {
            (false, false) => Self::Neither,
            (true, false) => Self::Left,
            (false, true) => Self::Right,
            (true, true) => Self::Both,
        }
    }

    /// (left transposed, right transposed).
    pub fn flags(self) -> (bool, bool) {
        match self {
            Self::Neither => (false, false),
            Self::Left => (true, false),
            Self::Right => (false, true),
            Self::Both => (true, true),
        }
    }
}
