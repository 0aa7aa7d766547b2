//! rollout (in progress).
