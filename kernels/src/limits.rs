//! How large a tensor a kernel may make: sizes that come from the model or from the inputs
//! (`ConstantOfShape`'s shape, `Range`'s bounds, `Resize`'s scales, a `Conv`'s pads) are
//! computed with checked arithmetic and checked against a limit before anything is allocated,
//! so that a hostile or mistaken model gets [`KernelError::ResourceLimit`] instead of an abort.
//!
//! The limit belongs to whoever runs the kernel: the engine sets it for the duration of a run
//! on the thread that calls [`Kernel::run`](crate::Kernel::run) ([`with_max_tensor_bytes`]);
//! elsewhere it is [`default_max_tensor_bytes`].

use std::cell::Cell;

use crate::error::{KernelError, Result};

thread_local! {
    static MAX_TENSOR_BYTES: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The limit where none is set: half the machine's memory (16 GiB where it cannot be read).
pub fn default_max_tensor_bytes() -> usize {
    static DEFAULT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| physical_memory().map_or(16 << 30, |total| total / 2))
}

/// The machine's memory in bytes, from `/proc/meminfo` (Linux). Miri's isolation forbids
/// opening files, so under Miri the fallback applies.
fn physical_memory() -> Option<usize> {
    if cfg!(miri) {
        return None;
    }
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The limit in force on this thread.
pub fn max_tensor_bytes() -> usize {
    MAX_TENSOR_BYTES
        .with(Cell::get)
        .unwrap_or_else(default_max_tensor_bytes)
}

/// Runs `f` with the limit set to `bytes` on this thread, then puts the previous one back.
pub fn with_max_tensor_bytes<R>(bytes: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<usize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            MAX_TENSOR_BYTES.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(MAX_TENSOR_BYTES.with(|c| c.replace(Some(bytes))));
    f()
}

/// The element count of `shape`, failing when it overflows or when that many elements of
/// `element_bytes` each pass the limit.
pub fn checked_elements(shape: &[usize], element_bytes: usize) -> Result<usize> {
    let too_large = || {
        KernelError::ResourceLimit(format!(
            "a tensor of shape {shape:?} is larger than the {} bytes a tensor may take",
            max_tensor_bytes()
        ))
    };
    let elements = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(too_large)?;
    // An empty shape's other dimensions are bounded as if the zeros were ones: ndarray refuses
    // them past isize::MAX, and kernels build tables as long as a dimension.
    if elements == 0 {
        let nonzero = shape
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .and_then(|n| n.checked_mul(element_bytes.max(1)));
        if nonzero.is_none_or(|bytes| bytes > max_tensor_bytes()) {
            return Err(KernelError::ResourceLimit(format!(
                "an empty tensor of shape {shape:?} has dimensions past the {} bytes a tensor \
                 may take (counting its zeros as ones)",
                max_tensor_bytes()
            )));
        }
    }
    let bytes = elements
        .checked_mul(element_bytes.max(1))
        .ok_or_else(too_large)?;
    match bytes <= max_tensor_bytes() {
        true => Ok(elements),
        false => Err(too_large()),
    }
}

/// A dimension computed from `i64` model values (a shape input, a pad sum): non-negative and
/// representable, or [`KernelError::InvalidValue`] naming `what`.
pub fn dim(value: i64, what: &str) -> Result<usize> {
    usize::try_from(value)
        .map_err(|_| KernelError::InvalidValue(format!("{what} is {value}, must be at least 0")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_and_limit_are_errors() {
        assert!(matches!(
            checked_elements(&[1 << 40, 1 << 40], 4),
            Err(KernelError::ResourceLimit(_))
        ));
        with_max_tensor_bytes(1000, || {
            assert_eq!(checked_elements(&[10, 25], 4), Ok(250));
            assert!(checked_elements(&[10, 26], 4).is_err());
        });
        assert_eq!(checked_elements(&[10, 26], 4), Ok(260));
    }

    /// An empty shape is refused when its other dimensions could not be an array's.
    #[test]
    fn empty_shapes_with_huge_dimensions_are_errors() {
        assert_eq!(checked_elements(&[1 << 20, 0, 2], 4), Ok(0));
        for huge in [[1 << 40, 0, 2], [i64::MAX as usize, 0, 2]] {
            assert!(
                matches!(
                    checked_elements(&huge, 4),
                    Err(KernelError::ResourceLimit(_))
                ),
                "{huge:?}"
            );
        }
    }
}
