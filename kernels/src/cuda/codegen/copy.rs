//! Data movement without arithmetic: one strided-copy kernel per element size covers
//! Transpose, Slice (with steps), Expand, Concat (each input into its window of the output),
//! Split, Tile's repetitions and Pad's interior; a fill kernel covers Pad's border and
//! ConstantOfShape. Only the element *size* matters, so one module serves every type of it.

use super::{GRID_STRIDE_LOOP, KernelSource, STRIDES_DECL, offsets_code};

/// The unsigned C type of `bytes` bytes.
pub(crate) fn word(bytes: usize) -> Option<&'static str> {
    Some(match bytes {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        8 => "unsigned long long",
        _ => return None,
    })
}

/// `y[dst(i)] = x[src(i)]` over a `Strides` iteration shape (operand 0 the source strides,
/// operand 1 the destination strides, both in elements from the pointers passed).
/// Arguments: `x, y, n, s`.
pub fn strided_copy_source(element_bytes: usize, rank: usize) -> Option<KernelSource> {
    let w = word(element_bytes)?;
    let source = format!(
        "{STRIDES_DECL}extern \"C\" __global__ void spillway_kernel(const {w}* __restrict__ x, {w}* __restrict__ y, long long n, Strides s) {{\n  {GRID_STRIDE_LOOP} {{\n    {offsets}    y[o1] = x[o0];\n  }}\n}}\n",
        offsets = offsets_code(rank, 2)
    );
    Some(KernelSource {
        key: format!("copy/{element_bytes}/strided{rank}"),
        source,
    })
}

/// `y[i] = value` for `n` elements, the value given as its bit pattern.
/// Arguments: `y, n, value`.
pub fn fill_source(element_bytes: usize) -> Option<KernelSource> {
    let w = word(element_bytes)?;
    let source = format!(
        "extern \"C\" __global__ void spillway_kernel({w}* __restrict__ y, long long n, {w} value) {{\n  {GRID_STRIDE_LOOP} {{ y[i] = value; }}\n}}\n"
    );
    Some(KernelSource {
        key: format!("fill/{element_bytes}"),
        source,
    })
}

/// Gather along one axis with indices already checked and made non-negative on the host:
/// the data viewed as `[outer, axis_dim, inner]`, the output as `[outer, count, inner]`.
/// Arguments: `x, indices (long long*), y, n, axis_dim, count, inner`.
pub fn gather_source(element_bytes: usize) -> Option<KernelSource> {
    let w = word(element_bytes)?;
    let source = format!(
        "extern \"C\" __global__ void spillway_kernel(const {w}* __restrict__ x, const long long* __restrict__ indices, {w}* __restrict__ y, long long n, long long axis_dim, long long count, long long inner) {{\n  {GRID_STRIDE_LOOP} {{\n    long long k = i % inner; long long j = (i / inner) % count; long long o = i / (inner * count);\n    y[i] = x[(o * axis_dim + indices[j]) * inner + k];\n  }}\n}}\n"
    );
    Some(KernelSource {
        key: format!("gather/{element_bytes}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_module_per_element_size() {
        assert!(
            strided_copy_source(4, 4)
                .unwrap()
                .source
                .contains("unsigned int")
        );
        assert_eq!(strided_copy_source(8, 2).unwrap().key, "copy/8/strided2");
        assert!(strided_copy_source(3, 2).is_none());
        assert!(
            fill_source(2)
                .unwrap()
                .source
                .contains("unsigned short value")
        );
    }
}
