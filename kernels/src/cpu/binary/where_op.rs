//! Where: `condition ? x : y` with three-way broadcasting, for any element type.

use ndarray::{ArrayD, ArrayViewD, IxDyn, Zip};

use super::broadcast::{PAR_THRESHOLD, broadcast_shapes};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{Tensor, dispatch_all};

/// The Where kernel.
#[derive(Debug)]
pub struct WhereKernel;

fn select<T: Clone + Send + Sync>(
    c: &ArrayViewD<'_, bool>,
    x: &ArrayViewD<'_, T>,
    y: &ArrayViewD<'_, T>,
) -> Result<ArrayD<T>> {
    let shape = broadcast_shapes(&[c.shape(), x.shape(), y.shape()])?;
    let bad = || KernelError::Shape("Where operands do not broadcast".into());
    let c = c.broadcast(IxDyn(&shape)).ok_or_else(bad)?;
    let x = x.broadcast(IxDyn(&shape)).ok_or_else(bad)?;
    let y = y.broadcast(IxDyn(&shape)).ok_or_else(bad)?;
    let zip = Zip::from(&c).and(&x).and(&y);
    let pick = |c: &bool, x: &T, y: &T| if *c { x.clone() } else { y.clone() };
    Ok(if c.len() >= PAR_THRESHOLD {
        zip.par_map_collect(pick)
    } else {
        zip.map_collect(pick)
    })
}

impl Kernel for WhereKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let c = input(inputs, 0)?;
        let x = input(inputs, 1)?;
        let y = input(inputs, 2)?;
        let Tensor::Bool(c) = c else {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: c.dtype(),
            });
        };
        if x.dtype() != y.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "X is {} but Y is {}",
                x.dtype(),
                y.dtype()
            )));
        }
        let out = dispatch_all!(x, a => Tensor::from(select(&c.view(), &a.view(), &y.view()?)?));
        Ok(vec![out])
    }
}
