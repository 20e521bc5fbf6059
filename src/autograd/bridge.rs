//! A composite op recorded on a [`Tape`] by its variables: the `Tensor` op itself, run on handles of the
//! variables' values that trace the tape, so that each op it is made of records its node (see
//! `crate::tensor::record`). A composite is so written once, as a `Tensor` method; the tape's method of the same
//! name only names the variables.

use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::tensor::{lock, Refusal, SharedTape, Tape, Tensor, Trace, Var};

use super::rules::refuse_without_rule;

/// A tape's recording moved behind a lock, put back when dropped.
struct Restore<'a> {
    tape: &'a mut Tape,
    shared: Arc<SharedTape>,
    refuse: Option<Refusal>,
}

impl<'a> Restore<'a> {
    fn new(tape: &'a mut Tape) -> Self {
        let refuse = tape.refuse;
        let mut recording = std::mem::take(tape);
        recording.refuse = Some(refuse_without_rule);
        Restore {
            tape,
            shared: Arc::new(Mutex::new(recording)),
            refuse,
        }
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        *self.tape = std::mem::take(&mut *lock(&self.shared));
        self.tape.refuse = self.refuse;
    }
}

impl Tape {
    /// Runs `op` on traced handles of `inputs`' values and gives back the variables of the tensors it returns:
    /// each the node the last op recorded for it, or (for a tensor no op recorded, such as a value computed
    /// from constants alone) a new constant.
    pub(crate) fn record_composite(
        &mut self,
        inputs: &[Var],
        op: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<Vec<Var>> {
        let values = inputs
            .iter()
            .map(|&var| Ok(self.node(var)?.value.share()))
            .collect::<Result<Vec<Tensor>>>()?;
        // The recording moves behind a lock for the ops to reach, and back whatever `op` gives (or if it panics).
        let restore = Restore::new(self);
        let id = lock(&restore.shared).id;
        let handles: Vec<Tensor> = values
            .into_iter()
            .zip(inputs)
            .map(|(value, var)| {
                value.traced(Trace {
                    tape: Arc::downgrade(&restore.shared),
                    id,
                    node: var.index,
                })
            })
            .collect();
        let results = op(&handles);
        drop(handles);
        let shared = Arc::clone(&restore.shared);
        drop(restore);
        let results = results?;
        Ok(results
            .into_iter()
            .map(|tensor| match tensor.trace() {
                Some(trace) if std::ptr::eq(trace.tape.as_ptr(), Arc::as_ptr(&shared)) => Var {
                    index: trace.node,
                    tape: id,
                },
                _ => self.push(tensor.share(), crate::tensor::Op::Leaf, false),
            })
            .collect())
    }

    /// [`Tape::record_composite`] for an op of one result.
    pub(crate) fn record_one(
        &mut self,
        inputs: &[Var],
        op: impl FnOnce(&[Tensor]) -> Result<Tensor>,
    ) -> Result<Var> {
        let vars = self.record_composite(inputs, |handles| Ok(vec![op(handles)?]))?;
        Ok(vars[0])
    }
}
