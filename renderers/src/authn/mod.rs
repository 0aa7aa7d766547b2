//! authn (in progress).
