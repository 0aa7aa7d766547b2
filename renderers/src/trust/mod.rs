//! trust (in progress).
