//! Placement: which device and stream runs each operator, and in which order.
