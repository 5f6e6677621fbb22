"""Callbacks, named as in `keras.callbacks`."""

from keratron.callbacks.backup_and_restore import BackupAndRestore
from keratron.callbacks.callback import Callback, CallbackList
from keratron.callbacks.csv_logger import CSVLogger
from keratron.callbacks.early_stopping import EarlyStopping
from keratron.callbacks.history import History
from keratron.callbacks.lambda_callback import LambdaCallback
from keratron.callbacks.learning_rate_scheduler import LearningRateScheduler
from keratron.callbacks.model_checkpoint import ModelCheckpoint
from keratron.callbacks.orbax_checkpoint import OrbaxCheckpoint
from keratron.callbacks.progbar_logger import ProgbarLogger
from keratron.callbacks.reduce_lr_on_plateau import ReduceLROnPlateau
from keratron.callbacks.remote_monitor import RemoteMonitor
from keratron.callbacks.swap_ema_weights import SwapEMAWeights
from keratron.callbacks.tensorboard import TensorBoard
from keratron.callbacks.terminate_on_nan import TerminateOnNaN

__all__ = [
    "BackupAndRestore",
    "CSVLogger",
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "History",
    "LambdaCallback",
    "LearningRateScheduler",
    "ModelCheckpoint",
    "OrbaxCheckpoint",
    "ProgbarLogger",
    "ReduceLROnPlateau",
    "RemoteMonitor",
    "SwapEMAWeights",
    "TensorBoard",
    "TerminateOnNaN",
]
