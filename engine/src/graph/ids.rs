//! Dense ids for the values of a graph, assigned once at load.

use std::num::NonZeroU32;

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(NonZeroU32);

        impl $name {
            /// The id for position `index` in its table.
            pub fn new(index: usize) -> Self {
                let raw = u32::try_from(index + 1).expect("fewer than 2^32 - 1 entries");
                Self(NonZeroU32::new(raw).expect("index + 1 is never zero"))
            }
            /// The position in its table.
            pub fn index(self) -> usize {
                self.0.get() as usize - 1
            }
        }
    };
}

dense_id!(
    /// A value (tensor) of a graph: an input, an initializer or a node output.
    ValueId
);
