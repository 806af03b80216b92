//! MatMul and Gemm through cuBLAS (`float`). cuBLAS is column-major; a row-major product
//! `C = A·B` is computed as the column-major `Cᵀ = Bᵀ·Aᵀ`, which reads the row-major buffers
//! as they are — no transposes are materialized.

use std::ffi::c_int;

use cudarc::cublas::result as blas;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};

use super::{GpuIo, GpuKernel, GpuNode};
use crate::DType;
use crate::cuda::codegen::{
    KernelSource, Strides, broadcast_strides, contiguous_strides, copy, launch_shape,
};
use crate::cuda::error::{CudaError, CudaResult};
use crate::cuda::gpu::{Gpu, KernelArg};

/// One (possibly batched) column-major SGEMM call: `C[m×n] = alpha·op(A)·op(B) + beta·C`.
#[derive(Debug, Clone, Copy)]
struct Sgemm {
    op_a: cublasOperation_t,
    op_b: cublasOperation_t,
    m: c_int,
    n: c_int,
    k: c_int,
    lda: c_int,
    ldb: c_int,
    ldc: c_int,
    stride_a: i64,
    stride_b: i64,
    stride_c: i64,
    batch: c_int,
    alpha: f32,
    beta: f32,
}

/// A product on the GPU: which inputs feed cuBLAS's A and B, and the optional Gemm bias
/// broadcast into the output first.
#[derive(Debug)]
struct Product {
    call: Sgemm,
    /// Node inputs passed as cuBLAS's A and B (swapped for the row-major trick).
    a_input: usize,
    b_input: usize,
    /// Gemm's C: a strided-copy kernel broadcasting input 2 into the output.
    bias: Option<(KernelSource, Strides, usize)>,
}

fn int(v: usize, node: &GpuNode<'_>) -> CudaResult<c_int> {
    c_int::try_from(v).map_err(|_| node.unsupported(format!("dimension {v} exceeds cuBLAS's int")))
}

pub(super) fn build_matmul(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let (a, b) = (node.input(0)?, node.input(1)?);
    if a.dtype != DType::F32 || b.dtype != DType::F32 {
        return Err(node.unsupported(format!("element type {:?}", a.dtype)));
    }
    let (ra, rb) = (a.shape.len(), b.shape.len());
    if ra < 2 || rb < 2 {
        return Err(node.unsupported("matrix-vector products (rank-1 operands)"));
    }
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    if b.shape[rb - 2] != k {
        return Err(node.unsupported(format!("{:?} x {:?}", a.shape, b.shape)));
    }
    let batch_a: usize = a.shape[..ra - 2].iter().product();
    let batch_b: usize = b.shape[..rb - 2].iter().product();
    // Row-major C[M', N] = A[M', K]·B[K, N] is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS's A is our B.
    let (rows, batch, stride_a, stride_b) = if batch_b == 1 {
        // B is one matrix: fold A's batch into its rows.
        (batch_a * m, 1, 0, 0)
    } else if batch_a == batch_b && a.shape[..ra - 2] == b.shape[..rb - 2] {
        (m, batch_a, k * n, m * k)
    } else if batch_a == 1 {
        (m, batch_b, k * n, 0)
    } else {
        return Err(node.unsupported(format!("batch broadcast {:?} x {:?}", a.shape, b.shape)));
    };
    Ok(Box::new(Product {
        call: Sgemm {
            op_a: CUBLAS_OP_N,
            op_b: CUBLAS_OP_N,
            m: int(n, node)?,
            n: int(rows, node)?,
            k: int(k, node)?,
            lda: int(n, node)?,
            ldb: int(k, node)?,
            ldc: int(n, node)?,
            stride_a: stride_a as i64,
            stride_b: stride_b as i64,
            stride_c: (rows * n) as i64,
            batch: int(batch, node)?,
            alpha: 1.0,
            beta: 0.0,
        },
        a_input: 1,
        b_input: 0,
        bias: None,
    }))
}

pub(super) fn build_gemm(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let attrs = node.spec.attrs;
    attrs.only(&["alpha", "beta", "transA", "transB", "broadcast"])?;
    let (a, b, y) = (node.input(0)?, node.input(1)?, node.output(0)?);
    if a.dtype != DType::F32 || a.shape.len() != 2 || b.shape.len() != 2 {
        return Err(node.unsupported(format!("{:?} {:?} x {:?}", a.dtype, a.shape, b.shape)));
    }
    let (trans_a, trans_b) = (attrs.int("transA", 0)? != 0, attrs.int("transB", 0)? != 0);
    let (m, k) = if trans_a {
        (a.shape[1], a.shape[0])
    } else {
        (a.shape[0], a.shape[1])
    };
    let n = if trans_b { b.shape[0] } else { b.shape[1] };
    if y.shape != [m, n] {
        return Err(node.unsupported(format!("output {:?}, expected [{m}, {n}]", y.shape)));
    }
    let bias = match node.inputs.get(2).and_then(Option::as_ref) {
        Some(c) => {
            let strides = broadcast_strides(&c.shape, &y.shape)
                .ok_or_else(|| node.unsupported(format!("C {:?} to {:?}", c.shape, y.shape)))?;
            let s = Strides::new(&y.shape, &[&strides, &contiguous_strides(&y.shape)])
                .ok_or_else(|| node.unsupported("rank"))?;
            let source = copy::strided_copy_source(4, 2).ok_or_else(|| node.unsupported("copy"))?;
            Some((source, s, y.len()))
        }
        None => None,
    };
    let beta = if bias.is_some() {
        attrs.float("beta", 1.0)?
    } else {
        0.0
    };
    Ok(Box::new(Product {
        call: Sgemm {
            op_a: if trans_b { CUBLAS_OP_T } else { CUBLAS_OP_N },
            op_b: if trans_a { CUBLAS_OP_T } else { CUBLAS_OP_N },
            m: int(n, node)?,
            n: int(m, node)?,
            k: int(k, node)?,
            lda: int(if trans_b { k } else { n }, node)?,
            ldb: int(if trans_a { m } else { k }, node)?,
            ldc: int(n, node)?,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
            batch: 1,
            alpha: attrs.float("alpha", 1.0)?,
            beta,
        },
        a_input: 1,
        b_input: 0,
        bias,
    }))
}

impl GpuKernel for Product {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let (a, b, c) = (
            io.input(self.a_input)?,
            io.input(self.b_input)?,
            io.output(0)?,
        );
        if let Some((source, strides, n)) = &self.bias {
            let args = [
                KernelArg::Ptr(io.input(2)?.ptr),
                KernelArg::Ptr(c.ptr),
                KernelArg::I64(*n as i64),
                KernelArg::Strides(*strides),
            ];
            gpu.launch(
                source,
                stream,
                launch_shape(*n, gpu.info().multiprocessors),
                0,
                &args,
            )?;
        }
        let g = self.call;
        // cuBLAS runs in the calling thread's current context.
        gpu.context()
            .bind_to_thread()
            .map_err(crate::cuda::error::driver("binding the context"))?;
        let handle = gpu.blas(stream);
        // SAFETY: the regions hold the shapes the call was built for; the handle is bound
        // to `stream`, which also ordered the bias copy before the product.
        let result = unsafe {
            if g.batch == 1 {
                blas::sgemm(
                    handle.0,
                    g.op_a,
                    g.op_b,
                    g.m,
                    g.n,
                    g.k,
                    &g.alpha,
                    a.ptr as *const f32,
                    g.lda,
                    b.ptr as *const f32,
                    g.ldb,
                    &g.beta,
                    c.ptr as *mut f32,
                    g.ldc,
                )
            } else {
                blas::sgemm_strided_batched(
                    handle.0,
                    g.op_a,
                    g.op_b,
                    g.m,
                    g.n,
                    g.k,
                    &g.alpha,
                    a.ptr as *const f32,
                    g.lda,
                    g.stride_a,
                    b.ptr as *const f32,
                    g.ldb,
                    g.stride_b,
                    &g.beta,
                    c.ptr as *mut f32,
                    g.ldc,
                    g.stride_c,
                    g.batch,
                )
            }
        };
        result.map_err(|e| CudaError::Cublas {
            what: "SGEMM",
            reason: format!("{e:?}"),
        })
    }
}
