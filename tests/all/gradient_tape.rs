//! `GradientTape`: ops that record themselves when an operand is traced. Each family of ops against the same
//! computation recorded op by op on a `Tape` by variable, bit for bit: values and gradients (the tape's
//! methods run the same `Tensor` ops on handles that trace it, so the two must record the same nodes); what an
//! untraced op records (nothing); a tape that is dropped, reset, or outlived by its session; and the refusals.

use std::sync::Arc;

use crate::common::{per_backend, Backend, Rng};
use wgcompute::{
    BatchNormOptions, BinaryOp, Conv1dOptions, Conv2dOptions, Error, GradientTape, IndexItem,
    PadMode, Padding, ReduceOp, Repeats, Result, Session, Slice, Split, Tape, Tensor, Transpose,
    UnaryOp, Var,
};

/// One computation written for both tapes: over traced tensors, and over a `Tape`'s variables.
struct Case {
    name: &'static str,
    shapes: Vec<Vec<usize>>,
    traced: fn(&[Tensor], &Constants) -> Result<Tensor>,
    by_variable: fn(&mut Tape, &[Var], &Constants) -> Result<Var>,
}

/// Inputs no gradient flows to: labels, a condition and indices.
struct Constants {
    labels: Tensor,
    condition: Tensor,
    /// u32 [3], a repeat among them: rows of a [5, 4] table.
    ids: Tensor,
    /// u32 [5, 2]: entries of each row of a [5, 4] table.
    along: Tensor,
    /// Running statistics of 4 channels.
    moving_mean: Tensor,
    moving_variance: Tensor,
}

fn input(tape: &mut Tape, constant: &Tensor) -> Result<Var> {
    Ok(tape.input(constant.try_clone()?))
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "a two-layer MLP with softmax cross-entropy",
            shapes: vec![vec![5, 7], vec![7, 4], vec![4], vec![4, 3]],
            traced: |v, c| {
                let hidden = v[0].matmul(&v[1])?.add(&v[2])?.relu()?;
                let logits = hidden.matmul(&v[3])?;
                let (losses, _) = logits.softmax_cross_entropy_with_logits(&c.labels)?;
                losses.mean(None)
            },
            by_variable: |t, v, c| {
                let product = t.matmul(v[0], v[1])?;
                let biased = t.add(product, v[2])?;
                let hidden = t.relu(biased)?;
                let logits = t.matmul(hidden, v[3])?;
                let labels = t.input(c.labels.try_clone()?);
                let losses = t.softmax_cross_entropy(logits, labels)?;
                t.mean(losses, None)
            },
        },
        Case {
            name: "unary rows and scalar forms",
            shapes: vec![vec![3, 5]],
            traced: |v, _| {
                let x = v[0].unary(UnaryOp::Tanh, 0.0)?.exp()?;
                let y = x.sigmoid()?.square()?.unary(UnaryOp::MulScalar, 1.5)?;
                y.unary(UnaryOp::AddScalar, -0.25)?.abs()?.neg()
            },
            by_variable: |t, v, _| {
                let x = t.unary(UnaryOp::Tanh, v[0], 0.0)?;
                let x = t.exp(x)?;
                let y = t.sigmoid(x)?;
                let y = t.square(y)?;
                let y = t.unary(UnaryOp::MulScalar, y, 1.5)?;
                let y = t.unary(UnaryOp::AddScalar, y, -0.25)?;
                let y = t.abs(y)?;
                t.neg(y)
            },
        },
        Case {
            name: "binary rows, broadcasting",
            shapes: vec![vec![3, 4], vec![4], vec![3, 1]],
            traced: |v, _| {
                let product = v[0].mul(&v[1])?.sub(&v[2])?;
                let quotient = product.binary(BinaryOp::Div, &v[1].square()?.add_scalar(1.0)?)?;
                quotient.maximum(&v[2])
            },
            by_variable: |t, v, _| {
                let product = t.mul(v[0], v[1])?;
                let product = t.sub(product, v[2])?;
                let squared = t.square(v[1])?;
                let shifted = t.add_scalar(squared, 1.0)?;
                let quotient = t.binary(BinaryOp::Div, product, shifted)?;
                t.maximum(quotient, v[2])
            },
        },
        Case {
            name: "where",
            shapes: vec![vec![3, 4], vec![4]],
            traced: |v, c| c.condition.where_(&v[0], &v[1])?.square(),
            by_variable: |t, v, c| {
                let condition = t.input(c.condition.try_clone()?);
                let chosen = t.where_(condition, v[0], v[1])?;
                t.square(chosen)
            },
        },
        Case {
            name: "reductions along an axis, over all, and over axes",
            shapes: vec![vec![2, 3, 4]],
            traced: |v, _| {
                let sums = v[0].sum(Some(1))?.square()?;
                let products = v[0].prod(Some(0))?.mean(None)?;
                let kept = v[0].reduce_axes(ReduceOp::Mean, Some(&[0, 2]), true)?;
                kept.mul(&sums.sum(None)?)?.add(&products)
            },
            by_variable: |t, v, _| {
                let sums = t.sum(v[0], Some(1))?;
                let sums = t.square(sums)?;
                let products = t.prod(v[0], Some(0))?;
                let products = t.mean(products, None)?;
                let kept = t.reduce_axes(ReduceOp::Mean, v[0], Some(&[0, 2]), true)?;
                let total = t.sum(sums, None)?;
                let scaled = t.mul(kept, total)?;
                t.add(scaled, products)
            },
        },
        Case {
            name: "permute, reshape and into_shape",
            shapes: vec![vec![2, 3, 4]],
            traced: |v, _| {
                let moved = v[0].permute(&[2, 0, 1])?.exp()?;
                let flat = moved.reshape(&[4, 6])?.square()?;
                flat.into_shape(&[24])?.mul(&v[0].reshape(&[24])?)
            },
            by_variable: |t, v, _| {
                let moved = t.permute(v[0], &[2, 0, 1])?;
                let moved = t.exp(moved)?;
                let flat = t.reshape(moved, &[4, 6])?;
                let flat = t.square(flat)?;
                let flat = t.reshape(flat, &[24])?;
                let x = t.reshape(v[0], &[24])?;
                t.mul(flat, x)
            },
        },
        Case {
            name: "softmax and log-softmax",
            shapes: vec![vec![4, 6]],
            traced: |v, _| v[0].softmax()?.mul(&v[0].log_softmax()?),
            by_variable: |t, v, _| {
                let soft = t.softmax(v[0])?;
                let log = t.log_softmax(v[0])?;
                t.mul(soft, log)
            },
        },
        Case {
            name: "products with 1-D operands and transposes",
            shapes: vec![vec![5], vec![5, 3], vec![3], vec![4, 3]],
            traced: |v, _| {
                let row = v[0].matmul(&v[1])?;
                let dot = row.matmul(&v[2])?;
                let batch = v[3].matmul_t(&v[1], Transpose::Right)?;
                batch.mul(&dot)
            },
            by_variable: |t, v, _| {
                let row = t.matmul(v[0], v[1])?;
                let dot = t.matmul(row, v[2])?;
                let batch = t.matmul_t(v[3], v[1], Transpose::Right)?;
                t.mul(batch, dot)
            },
        },
        Case {
            name: "layers: linear fused and by ops, a bias with its activation",
            shapes: vec![vec![4, 5], vec![5, 3], vec![3]],
            traced: |v, _| {
                let fused = v[0].linear(&v[1], Some(&v[2]), Some(UnaryOp::Relu))?;
                let plain = v[0].linear(&v[1], None, None)?;
                let activated = v[0].matmul(&v[1])?.bias_activation(&v[2], UnaryOp::Tanh)?;
                fused.add(&plain)?.mul(&activated)
            },
            by_variable: |t, v, _| {
                let fused = t.linear(v[0], v[1], Some(v[2]), Some(UnaryOp::Relu))?;
                let plain = t.linear(v[0], v[1], None, None)?;
                let product = t.matmul(v[0], v[1])?;
                let activated = t.bias_activation(product, v[2], UnaryOp::Tanh)?;
                let sum = t.add(fused, plain)?;
                t.mul(sum, activated)
            },
        },
        Case {
            name: "narrow, concat and broadcast_to",
            shapes: vec![vec![4, 6], vec![2, 6]],
            traced: |v, _| {
                let joined = Tensor::concat(&[&v[0].narrow(0, 1, 2)?, &v[1]], 0)?;
                let spread = v[1].narrow(0, 1, 1)?.broadcast_to(&[4, 6])?;
                joined.mul(&v[0])?.add(&spread)
            },
            by_variable: |t, v, _| {
                let middle = t.narrow(v[0], 0, 1, 2)?;
                let joined = t.concat(&[middle, v[1]], 0)?;
                let last = t.narrow(v[1], 0, 1, 1)?;
                let spread = t.broadcast_to(last, &[4, 6])?;
                let product = t.mul(joined, v[0])?;
                t.add(product, spread)
            },
        },
        Case {
            name: "gathers and scatters",
            shapes: vec![vec![5, 4], vec![3, 4]],
            traced: |v, c| {
                let rows = v[0].gather_rows(&c.ids)?.mul(&v[1])?.sum(None)?;
                let taken = v[0].take(&c.ids, 0)?.square()?.sum(None)?;
                let along = v[0].take_along_axis(&c.along, 1)?.exp()?.sum(None)?;
                let added = v[0].scatter_add(&c.ids, &v[1], 0)?.square()?.sum(None)?;
                let put = v[0]
                    .index_update(&c.ids, &v[1].exp()?, 0)?
                    .square()?
                    .sum(None)?;
                rows.add(&taken)?.add(&along)?.add(&added)?.add(&put)
            },
            by_variable: |t, v, c| {
                let ids = input(t, &c.ids)?;
                let along_ids = input(t, &c.along)?;
                let rows = t.gather_rows(v[0], ids)?;
                let rows = t.mul(rows, v[1])?;
                let rows = t.sum(rows, None)?;
                let taken = t.take(v[0], ids, 0)?;
                let taken = t.square(taken)?;
                let taken = t.sum(taken, None)?;
                let along = t.take_along_axis(v[0], along_ids, 1)?;
                let along = t.exp(along)?;
                let along = t.sum(along, None)?;
                let added = t.scatter_add(v[0], ids, v[1], 0)?;
                let added = t.square(added)?;
                let added = t.sum(added, None)?;
                let values = t.exp(v[1])?;
                let put = t.index_update(v[0], ids, values, 0)?;
                let put = t.square(put)?;
                let put = t.sum(put, None)?;
                let total = t.add(rows, taken)?;
                let total = t.add(total, along)?;
                let total = t.add(total, added)?;
                t.add(total, put)
            },
        },
        Case {
            name: "rolls, sorts, top-k, triangles and scans",
            shapes: vec![vec![3, 5], vec![3, 5]],
            traced: |v, _| {
                let rolled = v[0].roll(2, Some(1))?.add(&v[0].roll(-4, None)?)?;
                let sorted = v[0].sort(1, true)?.mul(&v[1])?;
                let (top, _) = v[0].top_k(2, 1, true)?;
                let triangles = v[0].tril(0)?.mul(&v[1].triu(1)?)?;
                let scans = v[0].cumulative_sum(Some(1), false)?;
                let products = v[1].cumulative_prod(Some(0), true)?.sum(None)?;
                let total = rolled
                    .mul(&sorted)?
                    .add(&triangles)?
                    .add(&scans)?
                    .sum(None)?;
                total.add(&top.square()?.sum(None)?)?.add(&products)
            },
            by_variable: |t, v, _| {
                let along = t.roll(v[0], 2, Some(1))?;
                let flat = t.roll(v[0], -4, None)?;
                let rolled = t.add(along, flat)?;
                let sorted = t.sort(v[0], 1, true)?;
                let sorted = t.mul(sorted, v[1])?;
                let (top, _) = t.top_k(v[0], 2, 1, true)?;
                let lower = t.tril(v[0], 0)?;
                let upper = t.triu(v[1], 1)?;
                let triangles = t.mul(lower, upper)?;
                let scans = t.cumulative_sum(v[0], Some(1), false)?;
                let products = t.cumulative_prod(v[1], Some(0), true)?;
                let products = t.sum(products, None)?;
                let total = t.mul(rolled, sorted)?;
                let total = t.add(total, triangles)?;
                let total = t.add(total, scans)?;
                let total = t.sum(total, None)?;
                let top = t.square(top)?;
                let top = t.sum(top, None)?;
                let total = t.add(total, top)?;
                t.add(total, products)
            },
        },
        Case {
            name: "convolutions and pools",
            shapes: vec![
                vec![2, 5, 5, 2],
                vec![3, 3, 2, 4],
                vec![2, 2, 3, 2],
                vec![2, 7, 3],
                vec![3, 3, 2],
            ],
            traced: |v, _| {
                let same = Conv2dOptions {
                    padding: Padding::Same,
                    ..Conv2dOptions::default()
                };
                let conv = v[0].conv2d(&v[1], &same)?.square()?.sum(None)?;
                let transposed = v[0]
                    .conv2d_transpose(&v[2], &Conv2dOptions::default())?
                    .square()?
                    .sum(None)?;
                let conv1 = v[3]
                    .conv1d(&v[4], &Conv1dOptions::default())?
                    .square()?
                    .sum(None)?;
                let max = v[0]
                    .max_pool2d([2, 2], [2, 2], Padding::Same)?
                    .square()?
                    .sum(None)?;
                let avg = v[0]
                    .avg_pool2d([3, 3], [1, 1], Padding::Same)?
                    .square()?
                    .sum(None)?;
                let global = v[0].global_avg_pool2d()?.square()?.sum(None)?;
                conv.add(&transposed)?
                    .add(&conv1)?
                    .add(&max)?
                    .add(&avg)?
                    .add(&global)
            },
            by_variable: |t, v, _| {
                let same = Conv2dOptions {
                    padding: Padding::Same,
                    ..Conv2dOptions::default()
                };
                let conv = t.conv2d(v[0], v[1], &same)?;
                let transposed = t.conv2d_transpose(v[0], v[2], &Conv2dOptions::default())?;
                let conv1 = t.conv1d(v[3], v[4], &Conv1dOptions::default())?;
                let max = t.max_pool2d(v[0], [2, 2], [2, 2], Padding::Same)?;
                let avg = t.avg_pool2d(v[0], [3, 3], [1, 1], Padding::Same)?;
                let global = t.global_avg_pool2d(v[0])?;
                let mut total: Option<Var> = None;
                for part in [conv, transposed, conv1, max, avg, global] {
                    let squared = t.square(part)?;
                    let sum = t.sum(squared, None)?;
                    total = Some(match total {
                        Some(total) => t.add(total, sum)?,
                        None => sum,
                    });
                }
                Ok(total.expect("parts"))
            },
        },
        Case {
            name: "statistics, shape ops, tiles, repeats, pads and indexing",
            shapes: vec![vec![3, 4], vec![3, 4], vec![1, 4]],
            traced: |v, c| {
                let var = v[0].var(Some(&[1]), 1.0, true)?.mul(&v[1])?;
                let std = v[1].std(None, 0.0, false)?;
                let lse = v[0].logsumexp(Some(&[0]), false)?.expand_dims(0)?;
                let squeezed = v[2].squeeze(&[0])?.expand_dims(0)?.flatten()?;
                let stacked = Tensor::stack(&[&v[0], &v[1]], 1)?.square()?.sum(None)?;
                let parts = v[0].unstack(0)?;
                let pieces = v[1].split(&Split::Sections(2), 1)?;
                let flat = Tensor::concat_flat(&[&parts[2], &pieces[1], &squeezed])?.exp()?;
                let tiled = v[2].tile(&[2, 1, 2])?.square()?.sum(None)?;
                let each = v[0]
                    .repeat(&Repeats::Each(2), Some(1))?
                    .square()?
                    .sum(None)?;
                let per = v[1]
                    .repeat(&Repeats::PerElement(vec![0, 2, 1]), Some(0))?
                    .square()?
                    .sum(None)?;
                let constant = v[0].pad(&[(1, 0), (0, 2)], PadMode::Constant(0.5))?;
                let edge = v[1].pad(&[(0, 1), (2, 1)], PadMode::Edge)?;
                let reflect = v[0].pad(&[(1, 1), (0, 0)], PadMode::Reflect)?;
                let pads = constant.mul(&edge.narrow(1, 0, 6)?.narrow(0, 0, 4)?)?;
                let indexed = v[0]
                    .index(&[
                        IndexItem::Slice(Slice {
                            start: Some(2),
                            stop: None,
                            step: -1,
                        }),
                        IndexItem::Array(&c.along.narrow(0, 0, 1)?),
                    ])?
                    .square()?
                    .sum(None)?;
                let flipped = v[1].flip(Some(&[1]))?.mul(&v[0])?.sum(None)?;
                let total = var.add(&lse)?.mul(&std)?.sum(None)?;
                let total = total.add(&stacked)?.add(&flat.sum(None)?)?.add(&tiled)?;
                let total = total.add(&each)?.add(&per)?.add(&pads.sum(None)?)?;
                total
                    .add(&reflect.square()?.sum(None)?)?
                    .add(&indexed)?
                    .add(&flipped)
            },
            by_variable: |t, v, c| {
                let var = t.var(v[0], Some(&[1]), 1.0, true)?;
                let var = t.mul(var, v[1])?;
                let std = t.std(v[1], None, 0.0, false)?;
                let lse = t.logsumexp(v[0], Some(&[0]), false)?;
                let lse = t.expand_dims(lse, 0)?;
                let squeezed = t.squeeze(v[2], &[0])?;
                let squeezed = t.expand_dims(squeezed, 0)?;
                let squeezed = t.flatten(squeezed)?;
                let stacked = t.stack(&[v[0], v[1]], 1)?;
                let stacked = t.square(stacked)?;
                let stacked = t.sum(stacked, None)?;
                let parts = t.unstack(v[0], 0)?;
                let pieces = t.split(v[1], &Split::Sections(2), 1)?;
                let flat = t.concat_flat(&[parts[2], pieces[1], squeezed])?;
                let flat = t.exp(flat)?;
                let tiled = t.tile(v[2], &[2, 1, 2])?;
                let tiled = t.square(tiled)?;
                let tiled = t.sum(tiled, None)?;
                let each = t.repeat(v[0], &Repeats::Each(2), Some(1))?;
                let each = t.square(each)?;
                let each = t.sum(each, None)?;
                let per = t.repeat(v[1], &Repeats::PerElement(vec![0, 2, 1]), Some(0))?;
                let per = t.square(per)?;
                let per = t.sum(per, None)?;
                let constant = t.pad(v[0], &[(1, 0), (0, 2)], PadMode::Constant(0.5))?;
                let edge = t.pad(v[1], &[(0, 1), (2, 1)], PadMode::Edge)?;
                let reflect = t.pad(v[0], &[(1, 1), (0, 0)], PadMode::Reflect)?;
                let edge = t.narrow(edge, 1, 0, 6)?;
                let edge = t.narrow(edge, 0, 0, 4)?;
                let pads = t.mul(constant, edge)?;
                let ids = input(t, &c.along.narrow(0, 0, 1)?)?;
                let indexed = t.index(
                    v[0],
                    &[
                        IndexItem::Slice(Slice {
                            start: Some(2),
                            stop: None,
                            step: -1,
                        }),
                        IndexItem::Array(ids),
                    ],
                )?;
                let indexed = t.square(indexed)?;
                let indexed = t.sum(indexed, None)?;
                let flipped = t.flip(v[1], Some(&[1]))?;
                let flipped = t.mul(flipped, v[0])?;
                let flipped = t.sum(flipped, None)?;
                let total = t.add(var, lse)?;
                let total = t.mul(total, std)?;
                let total = t.sum(total, None)?;
                let mut total = t.add(total, stacked)?;
                let flat = t.sum(flat, None)?;
                let pads = t.sum(pads, None)?;
                let reflect = t.square(reflect)?;
                let reflect = t.sum(reflect, None)?;
                for part in [flat, tiled, each, per, pads, reflect, indexed, flipped] {
                    total = t.add(total, part)?;
                }
                Ok(total)
            },
        },
        Case {
            name: "norms, dropout and attention",
            shapes: vec![
                vec![2, 2, 3, 4],
                vec![4],
                vec![4],
                vec![2, 2, 3, 4],
                vec![2, 2, 3, 4],
            ],
            traced: |v, c| {
                let layer = v[0].layer_norm(Some(&v[1]), Some(&v[2]), 1e-5)?;
                let rms = v[3].rms_norm(Some(&v[1]), 1e-6)?;
                let (mean, variance) = (&c.moving_mean, &c.moving_variance);
                let training = BatchNormOptions {
                    training: true,
                    momentum: 0.9,
                    epsilon: 1e-3,
                };
                let batch = v[4].batch_norm(mean, variance, Some(&v[1]), Some(&v[2]), &training)?;
                let inference = BatchNormOptions {
                    training: false,
                    ..training
                };
                let fixed = v[4].batch_norm(mean, variance, Some(&v[1]), None, &inference)?;
                let dropped = v[3].dropout(0.5, 7)?.add(&v[3].dropout(0.0, 7)?)?;
                let attended = v[0].scaled_dot_product_attention(&v[3], &v[4], None, true, None)?;
                let total = layer.mul(&rms)?.add(&batch.output)?.add(&fixed.output)?;
                total.add(&dropped)?.mul(&attended)
            },
            by_variable: |t, v, c| {
                let layer = t.layer_norm(v[0], Some(v[1]), Some(v[2]), 1e-5)?;
                let rms = t.rms_norm(v[3], Some(v[1]), 1e-6)?;
                let (mean, variance) = (&c.moving_mean, &c.moving_variance);
                let training = BatchNormOptions {
                    training: true,
                    momentum: 0.9,
                    epsilon: 1e-3,
                };
                let batch =
                    t.batch_norm(v[4], mean, variance, Some(v[1]), Some(v[2]), &training)?;
                let inference = BatchNormOptions {
                    training: false,
                    ..training
                };
                let fixed = t.batch_norm(v[4], mean, variance, Some(v[1]), None, &inference)?;
                let half = t.dropout(v[3], 0.5, 7)?;
                let whole = t.dropout(v[3], 0.0, 7)?;
                let dropped = t.add(half, whole)?;
                let attended =
                    t.scaled_dot_product_attention(v[0], v[3], v[4], None, true, None)?;
                let total = t.mul(layer, rms)?;
                let total = t.add(total, batch.output)?;
                let total = t.add(total, fixed.output)?;
                let total = t.add(total, dropped)?;
                t.mul(total, attended)
            },
        },
    ]
}

fn read(gradient: &Option<Tensor>, what: &str) -> Vec<u32> {
    gradient
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no gradient"))
        .to_vec()
        .expect("read back")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

per_backend!(each_op_records_the_node_the_tape_records);
fn each_op_records_the_node_the_tape_records(backend: &Backend) {
    let mut rng = Rng::fresh("gradient tape against the tape");
    let session = backend.poisoned();
    let constants = Constants {
        labels: session
            .upload(&rng.vec(15, 0.0, 1.0), &[5, 3])
            .expect("labels"),
        condition: session
            .upload_bool(&[true, false, false, true], &[4])
            .expect("condition"),
        ids: session.upload_u32(&[4, 0, 4], &[3]).expect("ids"),
        along: session
            .upload_u32(&[3, 0, 1, 1, 0, 2, 2, 3, 0, 0], &[5, 2])
            .expect("along"),
        moving_mean: session.upload(&rng.vec(4, -1.0, 1.0), &[4]).expect("mean"),
        moving_variance: session
            .upload(&rng.vec(4, 0.5, 2.0), &[4])
            .expect("variance"),
    };
    for case in cases() {
        let inputs: Vec<Arc<Tensor>> = case
            .shapes
            .iter()
            .map(|shape| {
                let len = shape.iter().product();
                Arc::new(
                    session
                        .upload(&rng.vec(len, -1.0, 1.0), shape)
                        .expect("input"),
                )
            })
            .collect();
        let mut tape = Tape::new();
        let vars: Vec<Var> = inputs.iter().map(|input| tape.param(input)).collect();
        let output = (case.by_variable)(&mut tape, &vars, &constants).expect(case.name);
        let expected = tape.gradient(output, &vars).expect(case.name);
        let expected_value = tape.value(output).expect("value").to_vec().expect("read");

        let gradient_tape = GradientTape::new();
        let watched: Vec<Tensor> = inputs
            .iter()
            .map(|input| gradient_tape.watch(input).expect("watch"))
            .collect();
        let result = (case.traced)(&watched, &constants).expect(case.name);
        assert!(
            result.is_traced() && result.wants_gradient(),
            "{}",
            case.name
        );
        let sources: Vec<&Tensor> = watched.iter().collect();
        let got = gradient_tape.gradient(&result, &sources).expect(case.name);

        let bits = |values: Vec<f32>| values.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            bits(result.to_vec().expect("read")),
            bits(expected_value),
            "{}: the value",
            case.name
        );
        for (position, (got, expected)) in got.iter().zip(&expected).enumerate() {
            let what = format!("{}: input {position}", case.name);
            assert_eq!(read(got, &what), read(expected, &what), "{what}");
        }
    }
}

per_backend!(ops_on_untraced_tensors_record_nothing);
fn ops_on_untraced_tensors_record_nothing(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let plain = session.upload(&[1.0, -2.0, 3.0], &[3]).expect("upload");
    let watched = tape.watch(&plain).expect("watch");
    assert_eq!(tape.len(), 1);
    let untouched = plain.exp().expect("exp").sum(None).expect("sum");
    assert!(!untouched.is_traced() && !plain.is_traced());
    assert_eq!(tape.len(), 1, "ops on the plain tensor recorded nothing");
    // A plain operand beside a traced one is recorded once, as a constant no gradient flows to.
    let product = watched.mul(&plain).expect("mul");
    assert_eq!(tape.len(), 3);
    assert!(tape.traces(&watched) && tape.traces(&product));
    assert!(!tape.traces(&plain) && !tape.traces(&untouched));
    assert!(
        !GradientTape::new().traces(&watched),
        "another tape does not trace it"
    );
    let [to_watched, to_plain] = tape
        .gradient(&product, &[&watched, &plain])
        .expect("gradient")
        .try_into()
        .expect("two");
    assert_eq!(
        to_watched.expect("watched").to_vec().expect("read"),
        vec![1.0, -2.0, 3.0]
    );
    assert!(
        to_plain.is_none(),
        "no gradient flows to an untraced tensor"
    );
    // A target the tape did not record gives no gradients.
    let [none] = tape
        .gradient(&untouched, &[&watched])
        .expect("gradient")
        .try_into()
        .expect("one");
    assert!(none.is_none());
}

per_backend!(a_tape_lets_go_of_its_values_when_dropped_or_reset);
fn a_tape_lets_go_of_its_values_when_dropped_or_reset(backend: &Backend) {
    let session = backend.open();
    let in_use = |session: &Session| session.memory_stats().expect("stats").in_use;
    let x = session.upload(&[0.5; 1000], &[10, 100]).expect("upload");
    let before = in_use(&session);
    let tape = GradientTape::new();
    let watched = tape.watch(&x).expect("watch");
    let result = watched
        .exp()
        .and_then(|y| y.square())
        .and_then(|y| y.sum(None))
        .expect("ops");
    drop(watched);
    // The tape keeps the intermediates it recorded.
    assert!(in_use(&session) > before);
    drop(tape);
    assert!(!result.is_traced(), "a tensor does not keep its tape alive");
    // The result outlives its tape as a plain tensor; ops on it record nothing.
    let total = result.item().expect("item");
    assert!((total - 1000.0 * 1f32.exp()).abs() < 0.01, "{total}");
    let halved = result.mul_scalar(0.5).expect("mul");
    assert!(!halved.is_traced());
    assert_eq!(halved.item().expect("item"), total * 0.5);
    drop(halved);
    drop(result);
    assert_eq!(
        in_use(&session),
        before,
        "the dropped tape gave back every value"
    );

    let tape = GradientTape::new();
    let watched = tape.watch(&x).expect("watch");
    let old = watched.square().expect("square");
    assert!(tape.traces(&old));
    tape.reset();
    assert!(tape.is_empty() && !tape.traces(&old) && !tape.traces(&watched));
    // A handle from before the reset is a plain tensor now: an op on it records nothing, and it has no gradient.
    assert!(!old.is_traced() && !old.wants_gradient());
    let later = old.exp().expect("exp");
    assert!(!later.is_traced());
    assert!(tape.is_empty(), "nothing was recorded after the reset");
    let [none] = tape
        .gradient(&later, &[&old])
        .expect("gradient")
        .try_into()
        .expect("one");
    assert!(none.is_none());
    drop((watched, old, later));
    assert_eq!(
        in_use(&session),
        before,
        "the reset tape gave back every value"
    );
}

per_backend!(a_closed_session_leaves_a_tape_holding_nothing);
fn a_closed_session_leaves_a_tape_holding_nothing(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let x = tape
        .watch(&session.upload(&[1.0, 2.0], &[2]).expect("upload"))
        .expect("watch");
    let y = x.square().expect("square");
    session.close();
    assert!(matches!(
        tape.gradient(&y, &[&x]),
        Err(Error::SessionClosed)
    ));
}

per_backend!(what_a_gradient_cannot_flow_through_is_refused);
fn what_a_gradient_cannot_flow_through_is_refused(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let x = tape
        .watch(
            &session
                .upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2])
                .expect("upload"),
        )
        .expect("watch");
    // Labels a gradient would flow to.
    let logits = session.upload(&[0.0; 4], &[2, 2]).expect("logits");
    assert!(matches!(
        logits.softmax_cross_entropy_with_logits(&x),
        Err(Error::InvalidArgument { .. })
    ));
    // A reduction without a gradient rule, where a gradient would flow through it, as it is recorded; on a
    // tensor no gradient flows to, it runs.
    for refused in [x.max(None), x.reduce_axes(ReduceOp::Min, Some(&[1]), false)] {
        match refused {
            Err(Error::InvalidArgument { given, .. }) => assert!(given == "max" || given == "min"),
            other => panic!("a max or min on the tape: {other:?}"),
        }
    }
    let constant = session.upload(&[1.0, 5.0], &[2]).expect("constant");
    let product = x.sum(Some(0)).expect("sum").mul(&constant).expect("mul");
    assert!(product.wants_gradient());
    assert_eq!(constant.max(None).expect("max").item().expect("item"), 5.0);
    // Integers are not watched.
    let ids = session.upload_u32(&[1, 2], &[2]).expect("ids");
    assert!(matches!(tape.watch(&ids), Err(Error::DType { .. })));
    // The session still works.
    assert_eq!(x.sum(None).expect("sum").item().expect("item"), 10.0);
}

per_backend!(a_tape_records_where_it_is_told_to);
fn a_tape_records_where_it_is_told_to(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let x = tape
        .watch(&session.upload(&[0.5, -1.0], &[2]).expect("upload"))
        .expect("watch");
    assert!(tape.is_recording());
    tape.stop_recording();
    assert!(!tape.is_recording());
    let paused = x.exp().expect("exp");
    assert!(
        !paused.is_traced() && tape.len() == 1,
        "nothing recorded while stopped"
    );
    tape.record_everywhere();
    assert!(x.exp().expect("exp").is_traced());
    tape.record_on_this_thread();
    let recorded = tape.len();
    let elsewhere = std::thread::scope(|scope| {
        scope
            .spawn(|| x.exp().expect("exp on another thread"))
            .join()
            .expect("the thread")
    });
    assert!(
        !elsewhere.is_traced(),
        "another thread's op is not recorded"
    );
    assert_eq!(tape.len(), recorded);
    assert_eq!(
        elsewhere.to_vec().expect("read"),
        x.exp().expect("exp").to_vec().expect("read")
    );
    let here = x.square().expect("square");
    assert!(here.is_traced() && tape.len() > recorded);
    let [dx] = tape
        .gradient(&here, &[&x])
        .expect("gradient")
        .try_into()
        .expect("one");
    assert_eq!(dx.expect("x").to_vec().expect("read"), vec![1.0, -2.0]);
}

per_backend!(a_gradient_taken_once_lets_go_of_the_tape);
fn a_gradient_taken_once_lets_go_of_the_tape(backend: &Backend) {
    let mut rng = Rng::fresh("gradient taken once");
    let session = backend.poisoned();
    let in_use = |session: &Session| session.memory_stats().expect("stats").in_use;
    let w = session.upload(&rng.vec(12, -1.0, 1.0), &[4, 3]).expect("w");
    let x = session.upload(&rng.vec(20, -1.0, 1.0), &[5, 4]).expect("x");
    let before = in_use(&session);
    let tape = GradientTape::new();
    let watched = tape.watch(&w).expect("watch");
    let cost = x
        .matmul(&watched)
        .and_then(|y| y.tanh())
        .and_then(|y| y.square())
        .and_then(|y| y.mean(None))
        .expect("ops");
    let kept = tape.gradient(&cost, &[&watched]).expect("gradient");
    let taken = tape
        .take_gradient(&cost, None, &[&watched, &x])
        .expect("take");
    assert_eq!(
        read(&taken[0], "taken").len(),
        12,
        "the gradient of the watched weights"
    );
    assert_eq!(read(&taken[0], "taken"), read(&kept[0], "kept"));
    assert!(taken[1].is_none(), "x was not watched");
    assert!(tape.is_empty(), "the recording was let go");
    // Asked again, the tape no longer knows the target.
    assert!(tape.gradient(&cost, &[&watched]).expect("again")[0].is_none());
    drop((kept, taken, cost, watched));
    assert_eq!(
        in_use(&session),
        before,
        "every value went back to the pool"
    );
}
