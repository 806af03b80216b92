//! `Einsum` (opset 12): any number of operands, explicit or implicit output, `...` ellipsis,
//! repeated labels (diagonals), traces and sums. Operands are reduced by diagonal extraction and
//! summation, then folded left to right by permute + reshape + batched matrix product.

use std::collections::BTreeMap;

use ndarray::{ArrayD, Axis, IxDyn};

use super::common::{min_opset, narrow, widen};
use super::matmul::{batched, plan};
use super::matrix::MatElem;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};
use crate::{DType, Element, Tensor};

/// A label: a letter's code point, or `ELLIPSIS + i` for the i-th broadcast dim.
type Label = u32;
const ELLIPSIS: Label = 1 << 16;

/// A built `Einsum`.
#[derive(Debug)]
pub struct Einsum {
    inputs: Vec<String>,
    output: Option<String>,
}

fn bad(reason: String) -> KernelError {
    KernelError::BadAttribute {
        name: "equation".into(),
        reason,
    }
}

/// Builds `Einsum`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 12, "Einsum")?;
    spec.attrs.only(&["equation"])?;
    let eq: String = spec
        .attrs
        .string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, out) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let inputs: Vec<String> = lhs.split(',').map(str::to_string).collect();
    for term in inputs.iter().chain(&out) {
        let rest = term.replacen("...", "", 1);
        if !rest.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(bad(format!("'{eq}': terms may hold letters and one '...'")));
        }
    }
    if spec.num_inputs != inputs.len() {
        return Err(KernelError::Arity(format!(
            "equation '{eq}' has {} operands, node has {} inputs",
            inputs.len(),
            spec.num_inputs
        )));
    }
    Ok(Box::new(Einsum {
        inputs,
        output: out,
    }))
}

/// Expands a term for an operand of `rank` dims into labels (ellipsis dims right-aligned to
/// `ell` global broadcast dims).
fn labels(term: &str, rank: usize, ell: usize) -> Result<Vec<Label>> {
    let letters = term.replace("...", "");
    match term.find("...") {
        None if letters.len() != rank => Err(KernelError::Shape(format!(
            "term '{term}' has {} labels for an operand of rank {rank}",
            letters.len()
        ))),
        None => Ok(letters.chars().map(|c| c as Label).collect()),
        Some(pos) => {
            let e = rank.checked_sub(letters.len()).ok_or_else(|| {
                KernelError::Shape(format!("term '{term}' has more labels than rank {rank}"))
            })?;
            let mut v: Vec<Label> = term[..pos].chars().map(|c| c as Label).collect();
            v.extend((ell - e..ell).map(|i| ELLIPSIS + i as Label));
            v.extend(term[pos + 3..].chars().map(|c| c as Label));
            Ok(v)
        }
    }
}

/// An operand with one label per axis.
struct Operand<T> {
    a: ArrayD<T>,
    l: Vec<Label>,
}

/// Extracts diagonals so that every label occurs once.
fn dedup<T: Copy>(a: ArrayD<T>, l: Vec<Label>) -> Result<Operand<T>> {
    let mut uniq: Vec<Label> = Vec::new();
    for &x in &l {
        if !uniq.contains(&x) {
            uniq.push(x);
        }
    }
    if uniq.len() == l.len() {
        return Ok(Operand { a, l });
    }
    for u in &uniq {
        let mut sizes = l
            .iter()
            .zip(a.shape())
            .filter(|(x, _)| *x == u)
            .map(|(_, &d)| d);
        let first = sizes.next().unwrap_or(0);
        if sizes.any(|d| d != first) {
            return Err(KernelError::Shape(format!(
                "a label repeated in one operand spans axes of different sizes ({:?})",
                a.shape()
            )));
        }
    }
    let shape: Vec<usize> = uniq
        .iter()
        .map(|u| a.shape()[l.iter().position(|x| x == u).unwrap_or(0)])
        .collect();
    let mut out = Vec::with_capacity(shape.iter().product());
    let mut idx = vec![0usize; uniq.len()];
    let total: usize = shape.iter().product();
    let mut src = vec![0usize; l.len()];
    for _ in 0..total {
        for (k, x) in l.iter().enumerate() {
            src[k] = idx[uniq.iter().position(|u| u == x).unwrap_or(0)];
        }
        out.push(a[IxDyn(&src)]);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let a = ArrayD::from_shape_vec(IxDyn(&shape), out)
        .map_err(|e| KernelError::Shape(e.to_string()))?;
    Ok(Operand { a, l: uniq })
}

/// Sums away every axis whose label is not in `keep` (wrapping for integers, as the products
/// are: `+` would panic on overflow where overflow checks are on).
fn sum_out<T: MatElem + num_traits::Zero>(mut op: Operand<T>, keep: &[Label]) -> Operand<T> {
    for ax in (0..op.l.len()).rev() {
        if !keep.contains(&op.l[ax]) {
            op.a =
                op.a.fold_axis(Axis(ax), T::ZERO, |&sum, &x| T::mul_add(x, T::ONE, sum));
            op.l.remove(ax);
        }
    }
    op
}

/// Contracts two operands, keeping the labels in `keep`.
fn contract<T: MatElem + num_traits::Zero>(
    x: Operand<T>,
    y: Operand<T>,
    keep: &[Label],
    size: &BTreeMap<Label, usize>,
) -> Result<Operand<T>> {
    let both: Vec<Label> = x.l.iter().copied().filter(|l| y.l.contains(l)).collect();
    let x = sum_out(x, &[keep, &both].concat());
    let y = sum_out(y, &[keep, &both].concat());
    let batch: Vec<Label> = both.iter().copied().filter(|l| keep.contains(l)).collect();
    let inner: Vec<Label> = both.iter().copied().filter(|l| !keep.contains(l)).collect();
    let left: Vec<Label> = x.l.iter().copied().filter(|l| !both.contains(l)).collect();
    let right: Vec<Label> = y.l.iter().copied().filter(|l| !both.contains(l)).collect();
    let arrange = |op: &Operand<T>, order: &[Label]| -> Result<Vec<T>> {
        let perm: Vec<usize> = order
            .iter()
            .map(|l| op.l.iter().position(|x| x == l).unwrap_or(0))
            .collect();
        let shape: Vec<usize> = order.iter().map(|l| size[l]).collect();
        let v = op.a.view().permuted_axes(IxDyn(&perm));
        let v = v.broadcast(IxDyn(&shape)).ok_or_else(|| {
            KernelError::Shape(format!(
                "Einsum operand dims {:?} do not broadcast to {shape:?}",
                op.a.shape()
            ))
        })?;
        Ok(v.iter().copied().collect())
    };
    let prod = |ls: &[Label]| ls.iter().map(|l| size[l]).product::<usize>();
    let (b, m, k, n) = (prod(&batch), prod(&left), prod(&inner), prod(&right));
    let xa = arrange(&x, &[batch.as_slice(), &left, &inner].concat())?;
    let ya = arrange(&y, &[batch.as_slice(), &inner, &right].concat())?;
    let p = plan(&[b, m, k], &[b, k, n])?;
    let out = batched(&p, &xa, &ya)?;
    let l = [batch.as_slice(), &left, &right].concat();
    let shape: Vec<usize> = l.iter().map(|x| size[x]).collect();
    let a = ArrayD::from_shape_vec(IxDyn(&shape), out)
        .map_err(|e| KernelError::Shape(e.to_string()))?;
    Ok(Operand { a, l })
}

impl Einsum {
    fn typed<T: MatElem + Element + num_traits::Zero>(&self, ts: &[&Tensor]) -> Result<Tensor> {
        let ell = ts
            .iter()
            .zip(&self.inputs)
            .filter(|(_, term)| term.contains("..."))
            .map(|(t, term)| t.rank().saturating_sub(term.replace("...", "").len()))
            .max()
            .unwrap_or(0);
        let mut size: BTreeMap<Label, usize> = BTreeMap::new();
        let mut ops = Vec::new();
        for (t, term) in ts.iter().zip(&self.inputs) {
            let l = labels(term, t.rank(), ell)?;
            for (&lab, &d) in l.iter().zip(t.shape()) {
                let e = size.entry(lab).or_insert(d);
                if *e != d && *e != 1 && d != 1 {
                    return Err(KernelError::Shape(format!(
                        "Einsum label sizes {e} and {d} differ"
                    )));
                }
                *e = (*e).max(d);
            }
            ops.push(dedup(t.view::<T>()?.to_owned(), l)?);
        }
        let out: Vec<Label> = match &self.output {
            Some(o) => {
                let l = labels(
                    o,
                    o.replace("...", "").len() + if o.contains("...") { ell } else { 0 },
                    ell,
                )?;
                if let Some(x) = l.iter().find(|x| !size.contains_key(x)) {
                    return Err(bad(format!(
                        "output label {:?} is not in any input",
                        char::from_u32(*x)
                    )));
                }
                l
            }
            None => {
                let mut count: BTreeMap<Label, usize> = BTreeMap::new();
                for term in &self.inputs {
                    for c in term.replace("...", "").chars() {
                        *count.entry(c as Label).or_default() += 1;
                    }
                }
                let mut l: Vec<Label> = (0..ell).map(|i| ELLIPSIS + i as Label).collect();
                l.extend(count.into_iter().filter(|&(_, n)| n == 1).map(|(c, _)| c));
                l
            }
        };
        let mut ops = ops.into_iter();
        let mut acc = ops
            .next()
            .ok_or_else(|| KernelError::Arity("Einsum needs an input".into()))?;
        let rest: Vec<Operand<T>> = ops.collect();
        if rest.is_empty() {
            acc = sum_out(acc, &out);
        }
        for (i, next) in rest.iter().enumerate() {
            let mut keep = out.clone();
            for later in &rest[i + 1..] {
                keep.extend(&later.l);
            }
            let next = Operand {
                a: next.a.clone(),
                l: next.l.clone(),
            };
            acc = contract(acc, next, &keep, &size)?;
        }
        let perm: Vec<usize> = out
            .iter()
            .map(|l| {
                acc.l.iter().position(|x| x == l).ok_or_else(|| {
                    KernelError::Shape(format!("Einsum output label {l:?} is not an input's"))
                })
            })
            .collect::<Result<_>>()?;
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != perm.len() || perm.len() != acc.l.len() {
            return Err(KernelError::Shape(
                "Einsum output labels must each appear once and name every kept axis".into(),
            ));
        }
        let shape: Vec<usize> = out.iter().map(|l| size[l]).collect();
        let v = acc.a.view().permuted_axes(IxDyn(&perm));
        let v = v
            .broadcast(IxDyn(&shape))
            .ok_or_else(|| KernelError::Shape("Einsum output broadcast".into()))?;
        Ok(T::into_tensor(v.to_owned().into_shared()))
    }
}

impl Kernel for Einsum {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let ts: Vec<&Tensor> = (0..inputs.len())
            .map(|i| crate::kernel::input(inputs, i))
            .collect::<Result<_>>()?;
        let dtype = ts
            .first()
            .map(|t| t.dtype())
            .ok_or_else(|| KernelError::Arity("Einsum needs an input".into()))?;
        if let Some(t) = ts.iter().find(|t| t.dtype() != dtype) {
            return Err(KernelError::DTypeMismatch(format!(
                "Einsum of {dtype} and {}",
                t.dtype()
            )));
        }
        let y = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => {
                let w: Vec<Tensor> = ts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| widen(t, i))
                    .collect::<Result<_>>()?;
                narrow(self.typed::<f32>(&w.iter().collect::<Vec<_>>())?, dtype)?
            }
            DType::F64 => self.typed::<f64>(&ts)?,
            DType::I32 => self.typed::<i32>(&ts)?,
            DType::I64 => self.typed::<i64>(&ts)?,
            DType::U32 => self.typed::<u32>(&ts)?,
            DType::U64 => self.typed::<u64>(&ts)?,
            other => {
                return Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other,
                });
            }
        };
        Ok(vec![y])
    }
}

#[cfg(test)]
mod tests {
    use crate::cpu::binary::test_util::run1;
    use crate::{AttrValue, Tensor};

    /// An integer sum wraps, as the integer products do and as ORT's C++ does; `+` panicked
    /// where overflow checks are on (the graph_gen campaign of 2026-12-07).
    #[test]
    fn integer_sums_wrap() {
        let equation = [("equation", AttrValue::String("ij->i".into()))];
        let x = Tensor::from_shape_vec(&[1, 3], vec![i32::MAX, 2, 3]).unwrap();
        let out = run1("Einsum", 12, &equation, &[&x]).unwrap();
        let want = i32::MAX.wrapping_add(2).wrapping_add(3);
        assert_eq!(out.to_i64_vec().unwrap(), vec![i64::from(want)]);
    }
}
