# ruff: noqa: UP031, E501, B007
"""TensorFlow's PTB language model (`ptb_word_lm.py`, TF 1.x tutorial "Recurrent Neural
Networks"): a MultiRNNCell of BasicLSTMCells unrolled over `num_steps`, the state carried from
batch to batch through `feed_dict`, gradients clipped by global norm, SGD with a decaying
learning rate, and perplexity printed per epoch. A training model and a validation model
(`reuse=True`) share the weights. Only the import line, the data (a synthetic text from a
fixed random Markov chain over 40 words instead of the downloaded PTB), the config (the "small"
config scaled down: 2 layers of 32 units, 10 steps, 3 epochs), `ptb_iterator` in place of the
queue-based producer, the per-sequence loss written with
`sparse_softmax_cross_entropy_with_logits` instead of `contrib.seq2seq.sequence_loss`, and the
initial weights (set from numpy after initialisation, so TensorFlow starts from the same ones)
differ from the original."""

import time

import numpy as np

import keratron.compat.v1 as tf


class SmallConfig:
    """Small config, scaled down."""

    init_scale = 0.1
    learning_rate = 1.0
    max_grad_norm = 5
    num_layers = 2
    num_steps = 10
    hidden_size = 32
    max_epoch = 2
    max_max_epoch = 3
    keep_prob = 1.0
    lr_decay = 0.5
    batch_size = 10
    vocab_size = 40


def synthetic_corpus(vocab_size, n_words, seed=0):
    """A text from a Markov chain: each word has two likely successors."""
    rng = np.random.RandomState(seed)
    successors = rng.randint(vocab_size, size=(vocab_size, 2))
    words, w = [], 0
    for _ in range(n_words):
        w = successors[w, rng.randint(2)] if rng.rand() < 0.95 else rng.randint(vocab_size)
        words.append(w)
    return np.array(words, np.int32)


def ptb_iterator(raw_data, batch_size, num_steps):
    """The tutorial's (TF 0.x) reader: (x, y) batches of [batch_size, num_steps] ids."""
    data_len = len(raw_data)
    batch_len = data_len // batch_size
    data = raw_data[: batch_size * batch_len].reshape(batch_size, batch_len)
    epoch_size = (batch_len - 1) // num_steps
    for i in range(epoch_size):
        x = data[:, i * num_steps : (i + 1) * num_steps]
        y = data[:, i * num_steps + 1 : (i + 1) * num_steps + 1]
        yield (x, y)


class PTBModel:
    """The PTB model."""

    def __init__(self, is_training, config):
        self.batch_size = batch_size = config.batch_size
        self.num_steps = num_steps = config.num_steps
        size = config.hidden_size
        vocab_size = config.vocab_size

        self._input_data = tf.placeholder(tf.int32, [batch_size, num_steps])
        self._targets = tf.placeholder(tf.int32, [batch_size, num_steps])

        def lstm_cell():
            cell = tf.nn.rnn_cell.BasicLSTMCell(size, forget_bias=0.0, state_is_tuple=True)
            if is_training and config.keep_prob < 1:
                cell = tf.nn.rnn_cell.DropoutWrapper(cell, output_keep_prob=config.keep_prob)
            return cell

        cell = tf.nn.rnn_cell.MultiRNNCell(
            [lstm_cell() for _ in range(config.num_layers)], state_is_tuple=True
        )
        self._initial_state = cell.zero_state(batch_size, tf.float32)

        embedding = tf.get_variable("embedding", [vocab_size, size], dtype=tf.float32)
        inputs = tf.nn.embedding_lookup(embedding, self._input_data)
        if is_training and config.keep_prob < 1:
            inputs = tf.nn.dropout(inputs, config.keep_prob)

        outputs = []
        state = self._initial_state
        with tf.variable_scope("RNN"):
            for time_step in range(num_steps):
                if time_step > 0:
                    tf.get_variable_scope().reuse_variables()
                (cell_output, state) = cell(inputs[:, time_step, :], state)
                outputs.append(cell_output)

        output = tf.reshape(tf.concat(outputs, 1), [-1, size])
        softmax_w = tf.get_variable("softmax_w", [size, vocab_size], dtype=tf.float32)
        softmax_b = tf.get_variable("softmax_b", [vocab_size], dtype=tf.float32)
        logits = tf.matmul(output, softmax_w) + softmax_b
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(self._targets, [-1]), logits=logits
        )
        self._cost = cost = tf.reduce_sum(loss) / batch_size
        self._final_state = state

        if not is_training:
            return

        self._lr = tf.Variable(0.0, trainable=False)
        tvars = tf.trainable_variables()
        grads, _ = tf.clip_by_global_norm(tf.gradients(cost, tvars), config.max_grad_norm)
        optimizer = tf.train.GradientDescentOptimizer(self._lr)
        self._train_op = optimizer.apply_gradients(zip(grads, tvars))

        self._new_lr = tf.placeholder(tf.float32, shape=[], name="new_learning_rate")
        self._lr_update = tf.assign(self._lr, self._new_lr)

    def assign_lr(self, session, lr_value):
        session.run(self._lr_update, feed_dict={self._new_lr: lr_value})

    @property
    def input_data(self):
        return self._input_data

    @property
    def targets(self):
        return self._targets

    @property
    def initial_state(self):
        return self._initial_state

    @property
    def cost(self):
        return self._cost

    @property
    def final_state(self):
        return self._final_state

    @property
    def lr(self):
        return self._lr

    @property
    def train_op(self):
        return self._train_op


def run_epoch(session, model, data, eval_op=None, verbose=False):
    """Runs the model on the given data."""
    epoch_size = ((len(data) // model.batch_size) - 1) // model.num_steps
    start_time = time.time()
    costs = 0.0
    iters = 0
    state = session.run(model.initial_state)
    fetches = {"cost": model.cost, "final_state": model.final_state}
    if eval_op is not None:
        fetches["eval_op"] = eval_op
    for step, (x, y) in enumerate(ptb_iterator(data, model.batch_size, model.num_steps)):
        feed_dict = {model.input_data: x, model.targets: y}
        for i, (c, h) in enumerate(model.initial_state):
            feed_dict[c] = state[i].c
            feed_dict[h] = state[i].h
        vals = session.run(fetches, feed_dict)
        state = vals["final_state"]
        costs += vals["cost"]
        iters += model.num_steps

        if verbose and step % (epoch_size // 4) == epoch_size // 4 - 1:
            print(
                "%.3f perplexity: %.3f speed: %.0f wps"
                % (
                    step * 1.0 / epoch_size,
                    np.exp(costs / iters),
                    iters * model.batch_size / (time.time() - start_time),
                )
            )
    return np.exp(costs / iters)


def main():
    config = SmallConfig()
    corpus = synthetic_corpus(config.vocab_size, 7000)
    train_data, valid_data = corpus[:6000], corpus[6000:]

    with tf.Graph().as_default():
        initializer = tf.random_uniform_initializer(-config.init_scale, config.init_scale)
        with tf.variable_scope("Model", reuse=None, initializer=initializer):
            m = PTBModel(is_training=True, config=config)
        with tf.variable_scope("Model", reuse=True, initializer=initializer):
            mvalid = PTBModel(is_training=False, config=config)

        params = tf.trainable_variables()
        print("trainable variables:", [v.name for v in params])
        print("parameters:", sum(int(np.prod(v.shape.as_list())) for v in params))

        with tf.Session() as session:
            tf.global_variables_initializer().run()
            # The same initial weights under TensorFlow: uniform(-init_scale, init_scale) from
            # numpy, in the order of the trainable variables.
            rng = np.random.RandomState(0)
            for v in params:
                v.load(
                    rng.uniform(-config.init_scale, config.init_scale, v.shape.as_list()),
                    session,
                )

            print("Epoch: 0 Valid Perplexity: %.4f" % run_epoch(session, mvalid, valid_data))
            for i in range(config.max_max_epoch):
                lr_decay = config.lr_decay ** max(i + 1 - config.max_epoch, 0.0)
                m.assign_lr(session, config.learning_rate * lr_decay)

                print("Epoch: %d Learning rate: %.3f" % (i + 1, session.run(m.lr)))
                train_perplexity = run_epoch(session, m, train_data, eval_op=m.train_op)
                print("Epoch: %d Train Perplexity: %.4f" % (i + 1, train_perplexity))
                valid_perplexity = run_epoch(session, mvalid, valid_data)
                print("Epoch: %d Valid Perplexity: %.4f" % (i + 1, valid_perplexity))


if __name__ == "__main__":
    main()
