"""scikit-learn's 8×8 digits learned by a Keras script: only the import differs from Keras's own.

    python examples/keras_digits.py [--epochs 40] [--batch-size 32] [--seed 0]

* Data: ``load_digits`` (1,797 images), pixels / 16, flattened to 64 features; a fixed stratified held-out
  quarter (``train_test_split(test_size=0.25, stratify=y, random_state=0)``).
* Model: ``Input(64) · Dense(64, relu) · Dropout(0.1) · Dense(10, softmax)``, Adam (lr 0.003),
  sparse categorical cross-entropy, accuracy; ``fit`` holds out the last 10% of the training images for
  validation and runs ``EarlyStopping(patience=8, restore_best_weights=True)`` and
  ``ReduceLROnPlateau(factor=0.5, patience=3)`` on the validation loss.
* Evaluation: ``model.evaluate`` on the held-out quarter.

Measured on lavapipe (Vulkan on 2 CPU cores, ``WGCOMPUTE_ADAPTER=vulkan``), the defaults above: seed 0 stops
early after 35 epochs with held-out accuracy 0.9667 (loss 0.091), the whole script in about 7 s (under 0.1 s an
epoch); seed 1 after 29 epochs, 0.9711. ``keras.utils.set_random_seed`` makes a run repeat exactly.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from wgcompute import keras


def load_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, x_test, y_train, y_test): float32 [n, 64] in [0, 1] and integer labels."""
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, stratify=digits.target, random_state=0
    )
    return x_train, x_test, y_train, y_test


def build_model() -> keras.Sequential:
    model = keras.Sequential(
        [
            keras.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.003),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def run(
    epochs: int = 40, batch_size: int = 32, seed: int = 0, verbose: int = 2
) -> dict[str, Any]:
    """Trains and evaluates; returns the history's dict, the held-out loss and accuracy."""
    keras.utils.set_random_seed(seed)
    x_train, x_test, y_train, y_test = load_data()
    model = build_model()
    model.summary()
    callbacks = [
        keras.callbacks.EarlyStopping(
            monitor="val_loss", patience=8, restore_best_weights=True
        ),
        keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=3),
    ]
    history = model.fit(
        x_train,
        y_train,
        batch_size=batch_size,
        epochs=epochs,
        validation_split=0.1,
        callbacks=callbacks,
        verbose=verbose,
    )
    test_loss, test_accuracy = model.evaluate(x_test, y_test, verbose=0)
    predictions = model.predict(x_test, verbose=0)
    model.close()
    return {
        "history": history.history,
        "test_loss": float(test_loss),
        "test_accuracy": float(test_accuracy),
        "predicted_accuracy": float((predictions.argmax(axis=1) == y_test).mean()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = run(args.epochs, args.batch_size, args.seed)
    print(
        f"held-out accuracy {result['test_accuracy']:.4f}, "
        f"held-out loss {result['test_loss']:.4f}"
    )
    return result


if __name__ == "__main__":
    main()
