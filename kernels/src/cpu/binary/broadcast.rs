//! The broadcast engine shared by every elementwise kernel: multidirectional (numpy)
//! shape rules, and a strided loop that keeps the innermost dimension a plain slice loop
//! so the compiler can vectorise it.
//!
//! After broadcasting, adjacent dimensions that are laid out alike in both operands are
//! merged, so the common cases reduce to a handful of shapes:
//! same shape (one flat loop), a scalar operand (flat loop against a constant),
//! trailing-channel broadcast (`[N, C] op [C]`: rows against one slice) and per-channel
//! broadcast (`[N, C, H, W] op [C, 1, 1]`: rows against a constant per row). Anything
//! else walks the outer dimensions with an odometer and still runs the inner loop on slices.

use std::mem::MaybeUninit;

use ndarray::{ArrayD, ArrayViewD, CowArray, IxDyn};
use rayon::prelude::*;

use crate::error::{KernelError, Result};

/// Element count above which elementwise loops are split across rayon threads.
pub const PAR_THRESHOLD: usize = 32 * 1024;

/// Elements per rayon task when a flat loop is split.
const PAR_CHUNK: usize = 16 * 1024;

/// The multidirectional broadcast of several shapes (numpy rules), or a shape error.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for shape in shapes {
        let offset = rank - shape.len();
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(KernelError::Shape(format!(
                    "shapes {:?} cannot be broadcast together",
                    shapes
                )));
            }
        }
    }
    Ok(out)
}

/// Fills `out` with `f(src[i])`, splitting across threads for large slices.
pub fn map_into<T, O, F>(src: &[T], out: &mut [MaybeUninit<O>], f: &F)
where
    T: Sync,
    O: Send + 'static,
    F: Fn(&T) -> O + Sync,
{
    if src.len() >= PAR_THRESHOLD {
        out.par_chunks_mut(PAR_CHUNK)
            .zip(src.par_chunks(PAR_CHUNK))
            .for_each(|(o, s)| map_slice(s, o, f));
    } else {
        map_slice(src, out, f);
    }
}

fn map_slice<T, O, F: Fn(&T) -> O>(src: &[T], out: &mut [MaybeUninit<O>], f: &F) {
    for (o, x) in out.iter_mut().zip(src) {
        o.write(f(x));
    }
}

/// Builds the kernel's (first) output, `len` elements, by letting `fill` initialise every slot;
/// the storage is the executor's offered buffer when there is one.
///
/// `fill` must write every element of the slice it is given; all callers here write
/// through loops whose bounds are exactly the slice length.
pub fn build_vec<O: 'static>(len: usize, fill: impl FnOnce(&mut [MaybeUninit<O>])) -> Vec<O> {
    crate::output_buffer::build(0, len, fill)
}

/// Applies `f` elementwise to any array, keeping the shape (unary kernels).
pub fn unary_map<T, O, F>(a: &ArrayViewD<'_, T>, f: F) -> ArrayD<O>
where
    T: Clone + Sync,
    O: Send + 'static,
    F: Fn(&T) -> O + Sync,
{
    let a = a.as_standard_layout();
    let src = a.as_slice().expect("standard layout is contiguous");
    let data = build_vec(src.len(), |out| map_into(src, out, &f));
    ArrayD::from_shape_vec(IxDyn(a.shape()), data).expect("length equals the shape's size")
}

/// The loop plan for one broadcast binary operation.
struct Plan {
    /// Output shape after merging dimensions; the last entry is the inner loop length.
    dims: Vec<usize>,
    /// Element strides of `a` per merged dimension (0 where broadcast).
    sa: Vec<usize>,
    /// Element strides of `b` per merged dimension (0 where broadcast).
    sb: Vec<usize>,
}

fn strides_for(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let offset = out.len() - shape.len();
    let mut strides = vec![0usize; out.len()];
    let mut acc = 1usize;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 {
            strides[offset + i] = acc;
        }
        acc *= shape[i];
    }
    strides
}

impl Plan {
    fn new(a: &[usize], b: &[usize], out: &[usize]) -> Plan {
        let fa = strides_for(a, out);
        let fb = strides_for(b, out);
        let mut dims: Vec<usize> = Vec::new();
        let mut sa: Vec<usize> = Vec::new();
        let mut sb: Vec<usize> = Vec::new();
        for i in 0..out.len() {
            if out[i] == 1 {
                continue;
            }
            if let Some(last) = dims.len().checked_sub(1) {
                // Merge with the previous (outer) dimension when both operands step through
                // the pair as one dimension.
                if sa[last] == fa[i] * out[i] && sb[last] == fb[i] * out[i] {
                    dims[last] *= out[i];
                    sa[last] = fa[i];
                    sb[last] = fb[i];
                    continue;
                }
            }
            dims.push(out[i]);
            sa.push(fa[i]);
            sb.push(fb[i]);
        }
        if dims.is_empty() {
            dims.push(1);
            sa.push(0);
            sb.push(0);
        }
        Plan { dims, sa, sb }
    }

    /// The element offsets of `a` and `b` at the start of outer row `row`.
    fn row_offsets(&self, mut row: usize) -> (usize, usize) {
        let (mut oa, mut ob) = (0, 0);
        for d in (0..self.dims.len() - 1).rev() {
            let i = row % self.dims[d];
            row /= self.dims[d];
            oa += i * self.sa[d];
            ob += i * self.sb[d];
        }
        (oa, ob)
    }
}

/// One inner loop: `n` outputs from `a` and `b`, each either a slice (stride 1) or a
/// repeated element (stride 0).
#[inline(always)]
fn inner<A, B, O, F: Fn(&A, &B) -> O>(
    out: &mut [MaybeUninit<O>],
    a: &[A],
    sa: usize,
    b: &[B],
    sb: usize,
    f: &F,
) {
    let n = out.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, x), y) in out.iter_mut().zip(&a[..n]).zip(&b[..n]) {
                o.write(f(x, y));
            }
        }
        (1, _) => {
            let y = &b[0];
            for (o, x) in out.iter_mut().zip(&a[..n]) {
                o.write(f(x, y));
            }
        }
        (_, 1) => {
            let x = &a[0];
            for (o, y) in out.iter_mut().zip(&b[..n]) {
                o.write(f(x, y));
            }
        }
        _ => {
            for o in out.iter_mut() {
                o.write(f(&a[0], &b[0]));
            }
        }
    }
}

/// Runs the plan over output rows `first_row..` filling `out` (a whole number of rows).
fn run_rows<A, B, O, F: Fn(&A, &B) -> O>(
    plan: &Plan,
    first_row: usize,
    out: &mut [MaybeUninit<O>],
    a: &[A],
    b: &[B],
    f: &F,
) {
    let n = *plan.dims.last().expect("plan has at least one dimension");
    let last = plan.dims.len() - 1;
    let (isa, isb) = (plan.sa[last], plan.sb[last]);
    let (mut oa, mut ob) = plan.row_offsets(first_row);
    // Odometer over the outer dimensions, kept in step with `oa`/`ob`.
    let mut idx = vec![0usize; last];
    let mut row = first_row;
    for d in (0..last).rev() {
        idx[d] = row % plan.dims[d];
        row /= plan.dims[d];
    }
    for chunk in out.chunks_mut(n) {
        inner(chunk, &a[oa..], isa, &b[ob..], isb, f);
        for d in (0..last).rev() {
            idx[d] += 1;
            oa += plan.sa[d];
            ob += plan.sb[d];
            if idx[d] < plan.dims[d] {
                break;
            }
            oa -= plan.sa[d] * plan.dims[d];
            ob -= plan.sb[d] * plan.dims[d];
            idx[d] = 0;
        }
    }
}

/// `f(a, b)` elementwise with multidirectional broadcasting.
pub fn zip_map<A, B, O, F>(a: &ArrayViewD<'_, A>, b: &ArrayViewD<'_, B>, f: F) -> Result<ArrayD<O>>
where
    A: Clone + Sync,
    B: Clone + Sync,
    O: Send + 'static,
    F: Fn(&A, &B) -> O + Sync,
{
    let shape = broadcast_shapes(&[a.shape(), b.shape()])?;
    let total: usize = shape.iter().product();
    let a: CowArray<'_, A, IxDyn> = a.as_standard_layout();
    let b: CowArray<'_, B, IxDyn> = b.as_standard_layout();
    let (sa, sb) = (
        a.as_slice().expect("standard layout is contiguous"),
        b.as_slice().expect("standard layout is contiguous"),
    );
    let data = if total == 0 {
        Vec::new()
    } else {
        let plan = Plan::new(a.shape(), b.shape(), &shape);
        let n = *plan.dims.last().expect("plan has at least one dimension");
        build_vec(total, |out| {
            if total < PAR_THRESHOLD {
                run_rows(&plan, 0, out, sa, sb, &f);
            } else if plan.dims.len() == 1 {
                // One flat loop: split it into chunks.
                let (isa, isb) = (plan.sa[0], plan.sb[0]);
                out.par_chunks_mut(PAR_CHUNK)
                    .enumerate()
                    .for_each(|(c, o)| {
                        let start = c * PAR_CHUNK;
                        inner(o, &sa[start * isa..], isa, &sb[start * isb..], isb, &f);
                    });
            } else {
                let rows_per_task = PAR_CHUNK.div_ceil(n).max(1);
                out.par_chunks_mut(rows_per_task * n)
                    .enumerate()
                    .for_each(|(c, o)| {
                        run_rows(&plan, c * rows_per_task, o, sa, sb, &f);
                    });
            }
        })
    };
    Ok(ArrayD::from_shape_vec(IxDyn(&shape), data).expect("length equals the shape's size"))
}
