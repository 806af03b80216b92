//! Storage for kernel outputs handed on by the executor: when an intermediate's last reader has
//! run, its memory goes back to the executor's plan, which offers it to the next node that the
//! static memory plan gives the same buffer. The kernel about to run takes an offered buffer
//! when it writes an output of that element type, and allocates otherwise.
//!
//! Buffers move by value (an offered buffer belongs to no tensor), so taking one is always safe;
//! the plan only decides how often memory is reused, never whether a result is right. Reused
//! memory is already mapped and written, so the kernel does not pay the page faults of a fresh
//! large allocation on every run. Values the plan could not size come from a [`Pool`] instead:
//! an output whose offered buffer is too small (or that has none) takes the pool's best fit.

use std::any::Any;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::buffer_pool::Pool;
use crate::{Tensor, dispatch_copy};

/// The memory of a dead tensor: a `Vec<T>` of some element type, with its elements.
#[derive(Debug)]
pub struct Buffer {
    data: Box<dyn Any + Send>,
    bytes: usize,
}

impl Buffer {
    /// Takes back the storage of `tensor` when nothing else shares it; `None` when it is shared
    /// (a view of a constant, an output also held elsewhere), holds strings, or is empty.
    pub fn reclaim(tensor: Tensor) -> Option<Buffer> {
        if tensor.is_empty() {
            return None;
        }
        dispatch_copy!(tensor, a => {
            let owned = a.try_into_owned_nocopy().ok()?;
            let (data, _) = owned.into_raw_vec_and_offset();
            Some(Buffer::new(data))
        }, _strings => None)
    }

    fn new<T: Send + 'static>(data: Vec<T>) -> Buffer {
        Buffer {
            bytes: data.capacity() * size_of::<T>(),
            data: Box::new(data),
        }
    }

    /// Bytes of capacity.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keeps `self` in `held` unless `held` already has a buffer at least as large (a plan's
    /// buffer keeps the largest memory any of its values left).
    pub fn keep_larger_in(self, held: &mut Option<Buffer>) {
        if held.as_ref().is_none_or(|old| old.bytes < self.bytes) {
            *held = Some(self);
        }
    }

    /// Whether the buffer holds `T`s.
    pub fn holds<T: 'static>(&self) -> bool {
        self.data.is::<Vec<T>>()
    }

    /// The vector, with its old elements, when it holds `T`s.
    pub fn into_vec<T: 'static>(self) -> Option<Vec<T>> {
        self.data.downcast::<Vec<T>>().ok().map(|data| *data)
    }
}

thread_local! {
    /// The buffers offered to the kernel running on this thread, by output index.
    static OFFERED: RefCell<Vec<Option<Buffer>>> = const { RefCell::new(Vec::new()) };
    /// The pool the kernel running on this thread may take from.
    static POOL: RefCell<Option<Arc<Pool>>> = const { RefCell::new(None) };
}

/// Runs `kernel` (on this thread) with `offers[i]` available as the storage of output `i`, and
/// `pool`'s buffers for outputs whose offer is missing or too small; buffers the kernel did not
/// take are back in `offers` afterwards, taken ones are `None`.
pub fn offer<R>(
    offers: &mut [Option<Buffer>],
    pool: Option<&Arc<Pool>>,
    kernel: impl FnOnce() -> R,
) -> R {
    /// Puts the offers back (and the outer ones in place) even if the kernel unwinds.
    struct Restore<'a> {
        offers: &'a mut [Option<Buffer>],
        outer: Vec<Option<Buffer>>,
        outer_pool: Option<Arc<Pool>>,
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let mine = OFFERED.replace(std::mem::take(&mut self.outer));
            for (slot, left) in self.offers.iter_mut().zip(mine) {
                *slot = left;
            }
            POOL.replace(self.outer_pool.take());
        }
    }
    let mine: Vec<Option<Buffer>> = offers.iter_mut().map(Option::take).collect();
    let outer = OFFERED.replace(mine);
    let outer_pool = POOL.replace(pool.cloned());
    let _restore = Restore {
        offers,
        outer,
        outer_pool,
    };
    kernel()
}

/// Storage for `len` `T`s of output `index`, with its old elements: the offered buffer when it
/// holds `T`s and is large enough, else the pool's best fit, else the offered buffer to grow.
fn take<T: 'static>(index: usize, len: usize) -> Option<Vec<T>> {
    let fits = OFFERED.with_borrow(|offers| {
        offers
            .get(index)
            .and_then(Option::as_ref)
            .map(|b| b.holds::<T>() && b.bytes() >= len.saturating_mul(size_of::<T>()))
    });
    if fits != Some(true)
        && let Some(data) = POOL.with_borrow(|pool| pool.as_ref().and_then(|p| p.take::<T>(len)))
    {
        return Some(data);
    }
    OFFERED.with_borrow_mut(|offers| {
        let slot = offers.get_mut(index)?;
        if !slot.as_ref()?.holds::<T>() {
            return None;
        }
        slot.take()?.into_vec()
    })
}

/// A vector of `len` elements for output `index`, every element written by `fill`: the offered
/// buffer when there is one of this element type, else a new allocation.
///
/// `fill` must initialise every element of the slice it is given (callers write through loops
/// bounded by exactly the slice's length).
pub fn build<T: 'static>(
    index: usize,
    len: usize,
    fill: impl FnOnce(&mut [MaybeUninit<T>]),
) -> Vec<T> {
    let mut data = take::<T>(index, len).unwrap_or_default();
    data.clear();
    data.reserve(len);
    fill(&mut data.spare_capacity_mut()[..len]);
    // SAFETY: `fill` initialised the first `len` slots (the contract above); `len <= capacity`.
    unsafe { data.set_len(len) };
    data
}

/// A vector of `len` elements for output `index` that the caller overwrites completely: zeros
/// when newly allocated (lazily mapped), the old (initialised) values when reused.
pub fn overwritable<T: Clone + Default + 'static>(index: usize, len: usize) -> Vec<T> {
    match take::<T>(index, len) {
        Some(mut data) => {
            // Only elements past the old length are written.
            data.truncate(len);
            data.resize(len, T::default());
            data
        }
        None => vec![T::default(); len],
    }
}

/// A vector of `len` default values (zeros) for output `index`.
pub fn zeroed<T: Clone + Default + 'static>(index: usize, len: usize) -> Vec<T> {
    filled(index, len, T::default())
}

/// A vector of `len` copies of `value` for output `index`.
pub fn filled<T: Clone + 'static>(index: usize, len: usize, value: T) -> Vec<T> {
    let mut data = take::<T>(index, len).unwrap_or_default();
    data.clear();
    data.resize(len, value);
    data
}

/// An empty vector with room for `capacity` elements, for output `index` (filled by pushing).
pub fn empty<T: 'static>(index: usize, capacity: usize) -> Vec<T> {
    let mut data = take::<T>(index, capacity).unwrap_or_default();
    data.clear();
    data.reserve(capacity);
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(values: Vec<f32>) -> Tensor {
        Tensor::from_shape_vec(&[values.len()], values).expect("shape")
    }

    #[test]
    fn a_reclaimed_buffer_is_taken_by_an_output_of_its_type() {
        let buffer = Buffer::reclaim(tensor(vec![1.0; 1000])).expect("unique");
        let address = {
            let mut offers = [Some(buffer)];
            let data = offer(&mut offers, None, || {
                build::<f32>(0, 500, |out| {
                    out.iter_mut().for_each(|o| {
                        o.write(2.0);
                    })
                })
            });
            assert!(offers[0].is_none(), "the kernel took the buffer");
            assert_eq!(data, vec![2.0; 500]);
            assert!(data.capacity() >= 1000, "the old capacity is kept");
            data.as_ptr() as usize
        };
        assert_ne!(address, 0);
    }

    #[test]
    fn a_buffer_of_another_type_is_left_offered() {
        let buffer = Buffer::reclaim(tensor(vec![1.0; 16])).expect("unique");
        let mut offers = [Some(buffer), None];
        let ints = offer(&mut offers, None, || zeroed::<i64>(0, 4));
        assert_eq!(ints, vec![0; 4]);
        assert!(offers[0].is_some(), "an f32 buffer cannot hold i64 values");
        // Outside `offer` nothing is offered.
        assert_eq!(zeroed::<f32>(0, 3), vec![0.0; 3]);
    }

    #[test]
    fn shared_tensors_are_not_reclaimed() {
        let t = tensor(vec![1.0; 8]);
        let other = t.clone();
        assert!(Buffer::reclaim(t).is_none());
        assert!(
            Buffer::reclaim(other).is_some(),
            "the last holder may give it back"
        );
    }

    #[test]
    fn zeroed_and_overwritable_give_the_length_asked() {
        let buffer = Buffer::reclaim(tensor(vec![5.0; 4])).expect("unique");
        let mut offers = [Some(buffer)];
        let z = offer(&mut offers, None, || zeroed::<f32>(0, 6));
        assert_eq!(z, vec![0.0; 6]);
        let buffer = Buffer::reclaim(tensor(vec![5.0; 4])).expect("unique");
        let mut offers = [Some(buffer)];
        let w = offer(&mut offers, None, || overwritable::<f32>(0, 6));
        assert_eq!(w.len(), 6);
    }

    #[test]
    fn the_pool_serves_outputs_whose_offer_is_missing_or_too_small() {
        let len = crate::buffer_pool::MIN_POOLED_BYTES; // floats
        let pool = Arc::new(Pool::new());
        pool.give(Buffer::reclaim(tensor(vec![1.0; len])).expect("unique"));
        let small = Buffer::reclaim(tensor(vec![1.0; 8])).expect("unique");
        let mut offers = [Some(small), None];
        let (a, b) = offer(&mut offers, Some(&pool), || {
            (overwritable::<f32>(0, len), zeroed::<f32>(1, len))
        });
        assert!(
            offers[0].is_some(),
            "the small offer was left for a smaller value"
        );
        assert_eq!(a.capacity(), len, "output 0 took the pooled buffer");
        assert_eq!(
            b,
            vec![0.0; len],
            "output 1 got new memory: the pool was empty"
        );
        assert_eq!(pool.bytes(), 0);
    }

    #[test]
    fn offers_nest_and_are_restored() {
        let outer = Buffer::reclaim(tensor(vec![1.0; 4])).expect("unique");
        let inner = Buffer::reclaim(tensor(vec![1.0; 4])).expect("unique");
        let mut outer_offers = [Some(outer)];
        offer(&mut outer_offers, None, || {
            let mut inner_offers = [Some(inner)];
            let v = offer(&mut inner_offers, None, || zeroed::<f32>(0, 2));
            assert!(inner_offers[0].is_none());
            assert_eq!(v.len(), 2);
        });
        assert!(outer_offers[0].is_some(), "the outer offer was not taken");
    }
}
