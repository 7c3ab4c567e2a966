//! Errors of the format layer: what is corrupt and where, or what is not
//! supported. Every parser returns these instead of panicking.
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The bytes are not a valid structure: `what` names the structure and
    /// field, `detail` the broken rule.
    Corrupt { what: String, detail: String },
    /// A valid structure of a kind ufskit does not handle (UFS1, big-endian).
    Unsupported(String),
}

impl FormatError {
    pub fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Self {
        FormatError::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Corrupt { what, detail } => write!(f, "corrupt {what}: {detail}"),
            FormatError::Unsupported(s) => write!(f, "unsupported: {s}"),
        }
    }
}

impl std::error::Error for FormatError {}
