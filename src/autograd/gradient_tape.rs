//! A tape that the ops record on themselves: TensorFlow's `GradientTape` (and PyTorch's autograd) over the
//! library's ops. A tensor the tape watches is traced; an op whose operand is traced records its node inside the
//! op, and its result is traced in turn, so that each op is written once, as a [`Tensor`] method.

use std::sync::{Arc, Mutex};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{lock, Op, Recording, SharedTape, Tape, Tensor, Trace, Var};

use super::backward::Gradients;

use super::rules::refuse_without_rule;

/// Records the ops on the tensors it watches, for [`GradientTape::gradient`].
///
/// [`GradientTape::watch`] gives a handle of a tensor (its data shared, not copied) that the tape traces. Every
/// op with a traced operand records itself and returns a traced result; other ops record nothing and cost
/// nothing more. The reverse walk uses the gradient rules of the op table.
///
/// The tape owns the values it recorded; a traced tensor refers to its tape weakly, so dropping the tape lets
/// them go (the tensors stay usable, as plain tensors). Like every tensor, the values hold no GPU memory past
/// their session's close: a gradient asked for then is [`Error::SessionClosed`].
///
/// ```
/// use wgcompute::{GradientTape, Session, SessionOptions};
/// # fn main() -> wgcompute::Result<()> {
/// let session = Session::open(SessionOptions::default())?;
/// let tape = GradientTape::new();
/// let x = tape.watch(&session.upload(&[1.0, 2.0, 3.0], &[3])?)?;
/// let total = x.square()?.sum(None)?;
/// let [dx] = tape.gradient(&total, &[&x])?.try_into().expect("one source");
/// assert_eq!(dx.expect("x took part").to_vec()?, vec![2.0, 4.0, 6.0]);
/// # Ok(()) }
/// ```
pub struct GradientTape {
    shared: Arc<SharedTape>,
}

impl Default for GradientTape {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for GradientTape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GradientTape")
            .field("nodes", &self.len())
            .finish()
    }
}

impl GradientTape {
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Mutex::new(Self::recording())),
        }
    }

    /// An empty recording that refuses, as it records them, the ops a gradient cannot flow through.
    fn recording() -> Tape {
        let mut tape = Tape::new();
        tape.refuse = Some(refuse_without_rule);
        tape
    }

    /// How many values the tape holds: watched tensors, constants and recorded results.
    pub fn len(&self) -> usize {
        lock(&self.shared).nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `tensor` as a tensor this tape traces, a gradient flowing to it: a handle sharing its data (no copy).
    /// Ops on the handle are recorded; ops on `tensor` itself are not, unless it is already traced. Watching a
    /// value the tape already traces makes a gradient flow to it from the ops recorded after.
    pub fn watch(&self, tensor: &Tensor) -> Result<Tensor> {
        tensor.expect_dtype("watch", DType::F32)?;
        let mut tape = lock(&self.shared);
        if let Some(node) = self.own_node(&tape, tensor) {
            tape.nodes[node].wants_gradient = true;
            return Ok(self.handle(&tape, tensor.share(), node));
        }
        let var = tape.push(tensor.share(), Op::Leaf, true);
        Ok(self.handle(&tape, tensor.share(), var.index))
    }

    /// `parameter`, shared with the layer that owns it, as a tensor this tape traces, a gradient flowing to it:
    /// what a layer's forward pass computes with. The tape keeps one node per parameter, so a layer used twice
    /// in a pass (or a penalty over the weights after it) gives the same node, and
    /// [`GradientTape::backward`]'s gradient of it is the sum over every use, found by
    /// [`Gradients::of`] with the `Arc` the layer holds. Only the handles this method gives count as the
    /// parameter: [`GradientTape::watch`] of the same tensor makes a node of its own, whose gradient
    /// [`GradientTape::gradient`] gives and `backward` does not.
    pub fn watch_parameter(&self, parameter: &Arc<Tensor>) -> Result<Tensor> {
        parameter.expect_dtype("watch_parameter", DType::F32)?;
        let mut tape = lock(&self.shared);
        let var = tape.param(parameter);
        Ok(self.handle(&tape, parameter.share(), var.index))
    }

    /// The gradients of the single value `target` with respect to every parameter watched by
    /// [`GradientTape::watch_parameter`] that it depends on: what an optimizer step takes. As
    /// [`GradientTape::take_gradient`] the walk lets go of each value as soon as it has passed it, and leaves the
    /// tape empty. An untraced `target` depends on no parameter: no gradients. A `target` traced by another
    /// tape, or by this one before a reset, and a `target` of more than one element (reduce it with `mean` or
    /// `sum` first) are errors, which leave the tape as it was.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use wgcompute::{GradientTape, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let w = Arc::new(session.upload(&[1.0, 2.0, 3.0], &[3])?);
    /// let tape = GradientTape::new();
    /// let cost = tape.watch_parameter(&w)?.square()?.sum(None)?;
    /// let gradients = tape.backward(&cost)?;
    /// assert_eq!(gradients.of(&w).expect("w took part").to_vec()?, vec![2.0, 4.0, 6.0]);
    /// # Ok(()) }
    /// ```
    pub fn backward(&self, target: &Tensor) -> Result<Gradients> {
        if target.len() != 1 {
            return Err(Error::Shape {
                op: "backward",
                message: format!(
                    "backward starts from a single value; got shape {:?} (reduce it with mean or sum first)",
                    target.shape()
                ),
            });
        }
        let (recorded, output) = {
            let mut tape = lock(&self.shared);
            let output = match self.own_node(&tape, target) {
                Some(node) => Some(tape.var_at(node)),
                None if target.trace().is_some() => {
                    return Err(Error::InvalidArgument {
                        what: "backward target",
                        given: "a tensor recorded on another tape, or on this one before a reset"
                            .to_string(),
                        expected: "a value recorded on this tape since its last reset".to_string(),
                    })
                }
                None => None,
            };
            let fresh = Self::fresh(&tape);
            (std::mem::replace(&mut *tape, fresh), output)
        };
        // The walk runs outside the lock, on the recording alone.
        match output {
            Some(output) => recorded.backward(output),
            None => Ok(Gradients::from_pairs([])),
        }
    }

    /// The gradients of `target` with respect to each of `sources` (watched tensors, or results recorded on
    /// this tape), in their order; `None` for a source `target` does not depend on through recorded ops, and
    /// for every source when the tape did not record `target`. A `target` of several elements is
    /// differentiated as the sum of its elements, as TensorFlow's `GradientTape.gradient` does. The tape is
    /// kept, so it may be asked again.
    pub fn gradient(&self, target: &Tensor, sources: &[&Tensor]) -> Result<Vec<Option<Tensor>>> {
        self.gradient_seeded(target, None, sources)
    }

    /// [`GradientTape::gradient`] with the gradient arriving at `target` given (of `target`'s shape; `None`
    /// is all ones): a vector-Jacobian product, TensorFlow's `output_gradients`.
    pub fn gradient_seeded(
        &self,
        target: &Tensor,
        output_gradient: Option<&Tensor>,
        sources: &[&Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        // The walk runs with the tape locked: its ops read untraced values only, so none records.
        let seed = output_gradient.map(Tensor::share);
        let tape = lock(&self.shared);
        let (output, asked) = self.nodes_of(&tape, target, sources);
        placed(
            sources.len(),
            output.map(|output| (output, asked)),
            |output, vars| tape.gradient_seeded(output, seed.as_ref(), vars),
        )
    }

    /// [`GradientTape::gradient_seeded`] once: the walk lets go of each value as soon as it has passed it, so
    /// its peak memory is lower, and the tape is left empty, as after [`GradientTape::reset`]. What a tape asked
    /// only once needs (TensorFlow's tape that is not persistent).
    pub fn take_gradient(
        &self,
        target: &Tensor,
        output_gradient: Option<&Tensor>,
        sources: &[&Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        let seed = output_gradient.map(Tensor::share);
        let (recorded, output, asked) = {
            let mut tape = lock(&self.shared);
            let (output, asked) = self.nodes_of(&tape, target, sources);
            let fresh = Self::fresh(&tape);
            (std::mem::replace(&mut *tape, fresh), output, asked)
        };
        // The walk runs outside the lock, on the recording alone: the tape records afresh meanwhile.
        placed(
            sources.len(),
            output.map(|output| (output, asked)),
            |output, vars| recorded.into_gradient(output, seed.as_ref(), vars),
        )
    }

    /// Forgets everything recorded, letting go of the values; the tensors it traced are plain tensors from now
    /// on, and the tape records afresh, where it recorded before.
    pub fn reset(&self) {
        let old = {
            let mut tape = lock(&self.shared);
            let fresh = Self::fresh(&tape);
            std::mem::replace(&mut *tape, fresh)
        };
        // The values go back to the pool outside the lock.
        drop(old);
    }

    /// Whether this tape traces `tensor`: a tensor it watched, or a result it recorded, since its last reset.
    pub fn traces(&self, tensor: &Tensor) -> bool {
        self.own_node(&lock(&self.shared), tensor).is_some()
    }

    /// Records on every thread (as a new tape does).
    pub fn record_everywhere(&self) {
        lock(&self.shared).recording = Recording::Everywhere;
    }

    /// Records on the calling thread only, as TensorFlow's tape records on the thread that entered it: on any
    /// other, an op on a traced tensor runs as on a plain one.
    pub fn record_on_this_thread(&self) {
        lock(&self.shared).recording = Recording::OnThread(std::thread::current().id());
    }

    /// Records nothing until [`GradientTape::record_everywhere`] or [`GradientTape::record_on_this_thread`]:
    /// an op on a traced tensor meanwhile runs as on a plain one, its result untraced (TensorFlow's
    /// `stop_recording`). Watching and gradients still work.
    pub fn stop_recording(&self) {
        lock(&self.shared).recording = Recording::Paused;
    }

    /// Whether an op on a traced tensor, run on this thread now, is recorded.
    pub fn is_recording(&self) -> bool {
        lock(&self.shared).recording.here()
    }

    /// An empty recording, with a new id (so that no trace from before names one of its nodes), recording
    /// where `old` did.
    fn fresh(old: &Tape) -> Tape {
        let mut tape = Self::recording();
        tape.recording = old.recording;
        tape
    }

    /// The variables of `target` and of those `sources` this tape traces, each with its position among them.
    fn nodes_of(
        &self,
        tape: &Tape,
        target: &Tensor,
        sources: &[&Tensor],
    ) -> (Option<Var>, Vec<(usize, Var)>) {
        let var = |tensor: &Tensor| self.own_node(tape, tensor).map(|node| tape.var_at(node));
        let asked = sources
            .iter()
            .enumerate()
            .filter_map(|(position, source)| var(source).map(|var| (position, var)))
            .collect();
        (var(target), asked)
    }

    /// The node `tensor` is on this tape, if the tape traces it.
    fn own_node(&self, tape: &Tape, tensor: &Tensor) -> Option<usize> {
        let trace = tensor.trace()?;
        std::ptr::eq(trace.tape.as_ptr(), Arc::as_ptr(&self.shared))
            .then(|| tape.traced_node(trace))
            .flatten()
    }

    fn handle(&self, tape: &Tape, value: Tensor, node: usize) -> Tensor {
        value.traced(Trace {
            tape: Arc::downgrade(&self.shared),
            id: tape.id,
            node,
        })
    }
}

/// The gradients a `walk` from the target's variable gives for the `asked` sources, each at its position
/// among `count` sources; `None` for the others, and for all when the tape did not record the target.
fn placed(
    count: usize,
    asked: Option<(Var, Vec<(usize, Var)>)>,
    walk: impl FnOnce(Var, &[Var]) -> Result<Vec<Option<Tensor>>>,
) -> Result<Vec<Option<Tensor>>> {
    let mut found: Vec<Option<Tensor>> = (0..count).map(|_| None).collect();
    let Some((output, asked)) = asked else {
        return Ok(found);
    };
    let vars: Vec<Var> = asked.iter().map(|&(_, var)| var).collect();
    for ((position, _), gradient) in asked.into_iter().zip(walk(output, &vars)?) {
        found[position] = gradient;
    }
    Ok(found)
}
