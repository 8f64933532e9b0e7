//! Claude Code JSONL decoder (being written).
