//! Codex rollout decoder (being written).
