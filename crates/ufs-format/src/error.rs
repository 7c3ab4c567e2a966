//! Errors of the format layer: what is corrupt and where, or what is not
//! supported. Every parser returns these instead of panicking.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The bytes are not a valid structure: `what` names the structure and
    /// field, `detail` the broken rule.
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// A valid structure of a kind ufskit does not handle (UFS1, big-endian).
    #[error("unsupported: {0}")]
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
