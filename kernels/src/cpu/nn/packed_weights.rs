//! Weights packed for the packed GEMM ([`PackedA`]) and kept with the kernel that packed them
//! while they stay the same tensor: a model's constant weights are packed once per session.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::packed_gemm::PackedA;
use crate::{KernelOptions, Tensor};

/// The packed matrices, with the tensor they were packed from: holding it keeps its buffer
/// alive (and, the array being copy-on-write, unchanged), so the same buffer address later
/// means the same weights.
struct Packed {
    source: Tensor,
    matrices: Vec<PackedA>,
}

/// A kernel's cache of one packed weight tensor (the first `f32` tensor it packs), with the
/// session's [`KernelOptions`] the weights are packed for.
#[derive(Default)]
pub struct WeightCache {
    options: KernelOptions,
    packed: OnceLock<Packed>,
}

impl std::fmt::Debug for WeightCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.packed.get() {
            Some(p) => write!(
                f,
                "WeightCache({:?}, {} matrices)",
                p.source.shape(),
                p.matrices.len()
            ),
            None => write!(f, "WeightCache(empty)"),
        }
    }
}

impl WeightCache {
    /// An empty cache for weights packed as `options` say.
    pub fn new(options: KernelOptions) -> Self {
        WeightCache {
            options,
            packed: OnceLock::new(),
        }
    }

    /// The options the weights are packed for.
    pub fn options(&self) -> &KernelOptions {
        &self.options
    }

    /// The instruction set the cached matrices are packed for (`None` while empty).
    pub fn packed_isa(&self) -> Option<super::packed_gemm::Isa> {
        self.packed.get()?.matrices.first().map(PackedA::isa)
    }

    /// The matrices packed from `w`: from the cache when `w` is the tensor packed before, else
    /// `pack()`ed now (and cached when `cacheable` — `w` is the kernel's input itself, not a
    /// converted copy — and the cache is empty). `None` when `pack` returns `None` (no packed
    /// GEMM on this CPU).
    pub fn get_or_pack(
        &self,
        w: &Tensor,
        cacheable: bool,
        pack: impl FnOnce() -> Option<Vec<PackedA>>,
    ) -> Option<Cow<'_, [PackedA]>> {
        if let Some(c) = self.packed.get()
            && same_buffer(&c.source, w)
        {
            return Some(Cow::Borrowed(&c.matrices));
        }
        let matrices = pack()?;
        if !cacheable {
            return Some(Cow::Owned(matrices));
        }
        if let Err(rejected) = self.packed.set(Packed {
            source: w.clone(),
            matrices,
        }) {
            // Another run cached first (these weights or others): use ours this time.
            return Some(Cow::Owned(rejected.matrices));
        }
        self.packed
            .get()
            .map(|c| Cow::Borrowed(c.matrices.as_slice()))
    }
}

/// What a kernel holding `packed` (and, for convolutions, `winograd`) computed with: see
/// [`crate::options::Choice`].
pub(crate) fn choice(packed: &WeightCache, winograd: Option<&WeightCache>) -> Option<String> {
    use crate::options::Choice;
    let choice = match (
        winograd.and_then(WeightCache::packed_isa),
        packed.packed_isa(),
    ) {
        (Some(isa), _) => Choice::Winograd(isa),
        (None, Some(isa)) => Choice::Packed(isa),
        (None, None) if packed.options().gemm_isa().is_none() => Choice::Generic,
        (None, None) => return None,
    };
    Some(choice.to_string())
}

/// Whether two tensors are views of the same `f32` buffer with the same layout.
fn same_buffer(a: &Tensor, b: &Tensor) -> bool {
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => {
            x.as_ptr() == y.as_ptr() && x.shape() == y.shape() && x.strides() == y.strides()
        }
        _ => false,
    }
}
