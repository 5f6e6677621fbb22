"""Writing your own callbacks (keras-io guide), on the bundled digits."""

import numpy as np
from _data import load_digits

import keratron as keras


def get_model():
    model = keras.Sequential()
    model.add(keras.layers.Dense(1))
    model.compile(
        optimizer=keras.optimizers.RMSprop(learning_rate=0.1),
        loss="mean_squared_error",
        metrics=["mean_absolute_error"],
    )
    return model


keras.utils.set_random_seed(1337)
(x_train, y_train), (x_test, y_test) = load_digits()
x_train = x_train.reshape(-1, 64).astype("float32") / 16.0
x_test = x_test.reshape(-1, 64).astype("float32") / 16.0
y_train = y_train.astype("float32")
y_test = y_test.astype("float32")

seen = []


class CustomCallback(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        keys = list(logs.keys())
        seen.append(("train_begin", keys))

    def on_train_end(self, logs=None):
        seen.append(("train_end", sorted(logs)))

    def on_epoch_begin(self, epoch, logs=None):
        keys = list(logs.keys())
        seen.append(("epoch_begin", keys))

    def on_epoch_end(self, epoch, logs=None):
        seen.append(("epoch_end", sorted(logs)))

    def on_test_begin(self, logs=None):
        seen.append(("test_begin", list(logs.keys())))

    def on_predict_begin(self, logs=None):
        seen.append(("predict_begin", list(logs.keys())))

    def on_train_batch_begin(self, batch, logs=None):
        seen.append(("train_batch_begin", list(logs.keys())))


model = get_model()
model.fit(
    x_train,
    y_train,
    batch_size=128,
    epochs=1,
    verbose=0,
    validation_split=0.5,
    callbacks=[CustomCallback()],
)
model.evaluate(x_test, y_test, batch_size=128, verbose=0, callbacks=[CustomCallback()])
model.predict(x_test, batch_size=128, verbose=0, callbacks=[CustomCallback()])
print("hooks called:", len(seen))


class LossAndErrorPrintingCallback(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        print(
            f"The average loss for epoch {epoch} is {logs['loss']:7.2f} "
            f"and mean absolute error is {logs['mean_absolute_error']:7.2f}."
        )


class EarlyStoppingAtMinLoss(keras.callbacks.Callback):
    """Stop training when the loss is at its min, i.e. the loss stops decreasing."""

    def __init__(self, patience=0):
        super().__init__()
        self.patience = patience
        self.best_weights = None

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = np.inf

    def on_epoch_end(self, epoch, logs=None):
        current = logs.get("loss")
        if np.less(current, self.best):
            self.best = current
            self.wait = 0
            self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = epoch
                self.model.stop_training = True
                self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")


class CustomLearningRateScheduler(keras.callbacks.Callback):
    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule

    def on_epoch_begin(self, epoch, logs=None):
        if not hasattr(self.model.optimizer, "learning_rate"):
            raise ValueError('Optimizer must have a "learning_rate" attribute.')
        lr = self.model.optimizer.learning_rate
        scheduled_lr = self.schedule(epoch, lr)
        self.model.optimizer.learning_rate = scheduled_lr
        print(f"Epoch {epoch}: Learning rate is {float(np.array(scheduled_lr)):6.4f}.")


LR_SCHEDULE = [(3, 0.05), (6, 0.01), (9, 0.005), (12, 0.001)]


def lr_schedule(epoch, lr):
    if epoch < LR_SCHEDULE[0][0] or epoch > LR_SCHEDULE[-1][0]:
        return lr
    for i in range(len(LR_SCHEDULE)):
        if epoch == LR_SCHEDULE[i][0]:
            return LR_SCHEDULE[i][1]
    return lr


model = get_model()
model.fit(
    x_train,
    y_train,
    batch_size=64,
    epochs=15,
    verbose=0,
    callbacks=[
        LossAndErrorPrintingCallback(),
        CustomLearningRateScheduler(lr_schedule),
        EarlyStoppingAtMinLoss(patience=3),
    ],
)
mae = model.evaluate(x_test, y_test, verbose=0)[1]
print(f"test mae: {mae:.4f}")
