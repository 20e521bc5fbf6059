//! A composite op recorded on a [`Tape`] by its variables: the `Tensor` op itself, run on handles of the
//! variables' values that trace the tape, so that each op it is made of records its node (see
//! `crate::tensor::record`). A composite is so written once, as a `Tensor` method; the tape's method of the same
//! name only names the variables.

use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::tensor::{lock, Tape, Tensor, Trace, Var};

use super::rules::refuse_without_rule;

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
        // The recording moves behind a lock for the ops to reach, and back whatever `op` gives.
        let refuse = self.refuse;
        let mut recording = std::mem::take(self);
        recording.refuse = Some(refuse_without_rule);
        let shared = Arc::new(Mutex::new(recording));
        let id = lock(&shared).id;
        let handles: Vec<Tensor> = values
            .into_iter()
            .zip(inputs)
            .map(|(value, var)| {
                value.traced(Trace {
                    tape: Arc::downgrade(&shared),
                    id,
                    node: var.index,
                })
            })
            .collect();
        let results = op(&handles);
        drop(handles);
        *self = std::mem::take(&mut *lock(&shared));
        self.refuse = refuse;
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
