//! Gantt rendering.
