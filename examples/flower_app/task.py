"""Synthetic federated logistic regression shared by the ClientApp and the ServerApp.

Worker ``i`` (the SuperNode started with ``--node-config "partition-id=i"``) holds
``partition_size(i) = 40 + 20·i`` examples drawn from its own seeded generator, so every
run sees the same data; its features are shifted by ``0.3·i`` so the workers differ.
The model is one array ``θ = (w, b)`` of ``DIM + 1`` numbers.
"""

from __future__ import annotations

import numpy as np

DIM = 5
TRUE_THETA = np.array([1.5, -2.0, 0.5, 1.0, -0.5, 0.25])  # (w, b) that labels the data


def partition_size(partition_id: int) -> int:
    """Number of examples on worker ``partition_id``."""
    return 40 + 20 * int(partition_id)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def make_data(seed: int, size: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``size`` labelled examples ``(X, y)`` from generator ``seed``; ``X`` carries a column of ones."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(shift, 1.0, size=(size, DIM)), np.ones((size, 1))])
    y = (rng.random(size) < _sigmoid(X @ TRUE_THETA)).astype(np.float64)
    return X, y


def load_partition(partition_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Worker ``partition_id``'s local data set."""
    pid = int(partition_id)
    return make_data(1000 + pid, partition_size(pid), shift=0.3 * pid)


def test_set() -> tuple[np.ndarray, np.ndarray]:
    """The server's held-out set, for the centralised evaluation."""
    return make_data(7, 500)


def loss_and_accuracy(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Mean logistic loss and accuracy of ``θ`` on ``(X, y)``."""
    p = np.clip(_sigmoid(X @ theta), 1e-12, 1 - 1e-12)
    loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    return float(loss), float(np.mean((p >= 0.5) == (y == 1)))


def local_train(theta: np.ndarray, X: np.ndarray, y: np.ndarray, epochs: int, lr: float,
                proximal_mu: float = 0.0) -> np.ndarray:
    """``epochs`` steps of full-batch gradient descent on the logistic loss from ``θ``.

    With ``proximal_mu > 0`` the loss has FedProx's proximal term ``μ/2 ‖θ − θ_global‖²``
    (Li et al., "Federated Optimization in Heterogeneous Networks", 2020), ``θ_global``
    the received model; the strategy sends ``μ`` as ``proximal-mu`` in the train config.
    """
    start = np.array(theta, dtype=np.float64)
    theta = start.copy()
    for _ in range(int(epochs)):
        theta -= lr * (X.T @ (_sigmoid(X @ theta) - y) / len(y) + proximal_mu * (theta - start))
    return theta
