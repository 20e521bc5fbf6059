//! How sorting and searching read their operands.

/// Which side of equal elements a search lands on (the Array API's `searchsorted(side=)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Side {
    /// The first position whose element is not before the needle: `x1[i-1] < v <= x1[i]`.
    #[default]
    Left,
    /// The first position whose element is after the needle: `x1[i-1] <= v < x1[i]`.
    Right,
}

impl Side {
    /// From the standard's spelling, "left" or "right".
    pub fn from_name(name: &str) -> Option<Side> {
        match name {
            "left" => Some(Side::Left),
            "right" => Some(Side::Right),
            _ => None,
        }
    }
}
