//! One error type for the whole core, with the kinds the WebNN spec uses. `api` maps each kind to
//! the matching JavaScript exception in one place.

/// An error from the core, carrying the spec's error kind and a message for the developer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Invalid argument: JavaScript `TypeError`.
    #[error("TypeError: {0}")]
    Type(String),
    /// Object in the wrong state (destroyed, built, lost): `InvalidStateError`.
    #[error("InvalidStateError: {0}")]
    InvalidState(String),
    /// The platform could not carry out a valid request (build failure): `OperationError`.
    #[error("OperationError: {0}")]
    Operation(String),
    /// A memory budget or device limit would be exceeded: `QuotaExceededError`.
    #[error("QuotaExceededError: {0}")]
    QuotaExceeded(String),
    /// Data that is malformed (weight files): `DataError`.
    #[error("DataError: {0}")]
    Data(String),
    /// Nothing under the name asked for (a graph cache key): `NotFoundError`.
    #[error("NotFoundError: {0}")]
    NotFound(String),
    /// A valid request this implementation does not support: `NotSupportedError`.
    #[error("NotSupportedError: {0}")]
    NotSupported(String),
    /// A failure with no better kind (GPU allocation failure): `UnknownError`.
    #[error("UnknownError: {0}")]
    Unknown(String),
}

impl Error {
    /// The DOMException name (or `TypeError`) that this error becomes in JavaScript.
    pub fn name(&self) -> &'static str {
        match self {
            Error::Type(_) => "TypeError",
            Error::InvalidState(_) => "InvalidStateError",
            Error::Operation(_) => "OperationError",
            Error::QuotaExceeded(_) => "QuotaExceededError",
            Error::Data(_) => "DataError",
            Error::NotFound(_) => "NotFoundError",
            Error::NotSupported(_) => "NotSupportedError",
            Error::Unknown(_) => "UnknownError",
        }
    }

    /// The message without the kind prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::Type(m)
            | Error::InvalidState(m)
            | Error::Operation(m)
            | Error::QuotaExceeded(m)
            | Error::Data(m)
            | Error::NotFound(m)
            | Error::NotSupported(m)
            | Error::Unknown(m) => m,
        }
    }
}

/// Result alias of the core.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns `Err(Error::Type(..))` with a formatted message.
#[macro_export]
macro_rules! type_error {
    ($($arg:tt)*) => { Err($crate::error::Error::Type(format!($($arg)*))) };
}
