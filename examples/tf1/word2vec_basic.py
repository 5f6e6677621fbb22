# ruff: noqa: UP031, E501, B007 (the tutorial's own %-formatting, lines and loop)
"""TensorFlow's `word2vec_basic.py` (TF 1.x tutorial "Vector Representations of Words"):
skip-gram batches, an NCE loss over the embeddings, and the nearest words by cosine
similarity. Only the import line, the text (a synthetic corpus generated here instead of the
downloaded text8: sentences on one of eight topics joined by function words), the sizes
(vocabulary 64, embedding 32, 8 negative samples, 1,201 steps), seeds and initial weights set
from numpy (so TensorFlow starts from the same ones), and the lack of a t-SNE plot differ
from the original."""

import collections
import math
import random

import numpy as np

import keratron.compat.v1 as tf

# Step 1: the text. Eight topics of seven words; each sentence talks about one topic.
TOPICS = [
    "cat dog horse cow sheep goat pig",
    "red blue green yellow purple orange white",
    "one two three four five six seven",
    "king queen prince princess duke lord lady",
    "paris london berlin rome madrid vienna prague",
    "apple banana cherry grape lemon mango peach",
    "run walk jump swim climb crawl dance",
    "piano violin guitar drum flute harp cello",
]
FUNCTION_WORDS = "the a of and to in is".split()


def synthetic_text(n_sentences, seed=0):
    rng = np.random.RandomState(seed)
    words = []
    for _ in range(n_sentences):
        topic = TOPICS[rng.randint(len(TOPICS))].split()
        for _ in range(6):
            words.append(topic[rng.randint(len(topic))])
            if rng.rand() < 0.5:
                words.append(FUNCTION_WORDS[rng.randint(len(FUNCTION_WORDS))])
    return words


vocabulary = synthetic_text(3000)
print("Data size", len(vocabulary))

# Step 2: Build the dictionary and replace rare words with UNK token.
vocabulary_size = 64


def build_dataset(words, n_words):
    """Process raw inputs into a dataset."""
    count = [["UNK", -1]]
    count.extend(collections.Counter(words).most_common(n_words - 1))
    dictionary = dict()
    for word, _ in count:
        dictionary[word] = len(dictionary)
    data = list()
    unk_count = 0
    for word in words:
        index = dictionary.get(word, 0)
        if index == 0:  # dictionary['UNK']
            unk_count += 1
        data.append(index)
    count[0][1] = unk_count
    reversed_dictionary = dict(zip(dictionary.values(), dictionary.keys()))
    return data, count, dictionary, reversed_dictionary


data, count, dictionary, reverse_dictionary = build_dataset(vocabulary, vocabulary_size)
del vocabulary  # Hint to reduce memory.
print("Most common words (+UNK)", count[:5])
print("Sample data", data[:10], [reverse_dictionary[i] for i in data[:10]])

data_index = 0
random.seed(0)


# Step 3: Function to generate a training batch for the skip-gram model.
def generate_batch(batch_size, num_skips, skip_window):
    global data_index
    assert batch_size % num_skips == 0
    assert num_skips <= 2 * skip_window
    batch = np.ndarray(shape=(batch_size), dtype=np.int32)
    labels = np.ndarray(shape=(batch_size, 1), dtype=np.int32)
    span = 2 * skip_window + 1  # [ skip_window target skip_window ]
    buffer = collections.deque(maxlen=span)
    if data_index + span > len(data):
        data_index = 0
    buffer.extend(data[data_index : data_index + span])
    data_index += span
    for i in range(batch_size // num_skips):
        context_words = [w for w in range(span) if w != skip_window]
        words_to_use = random.sample(context_words, num_skips)
        for j, context_word in enumerate(words_to_use):
            batch[i * num_skips + j] = buffer[skip_window]
            labels[i * num_skips + j, 0] = buffer[context_word]
        if data_index == len(data):
            buffer.extend(data[0:span])
            data_index = span
        else:
            buffer.append(data[data_index])
            data_index += 1
    # Backtrack a little bit to avoid skipping words in the end of a batch
    data_index = (data_index + len(data) - span) % len(data)
    return batch, labels


batch, labels = generate_batch(batch_size=8, num_skips=2, skip_window=1)
for i in range(8):
    print(
        batch[i], reverse_dictionary[batch[i]], "->", labels[i, 0], reverse_dictionary[labels[i, 0]]
    )

# Step 4: Build and train a skip-gram model.
batch_size = 128
embedding_size = 32  # Dimension of the embedding vector.
skip_window = 1  # How many words to consider left and right.
num_skips = 2  # How many times to reuse an input to generate a label.
num_sampled = 8  # Number of negative examples to sample.

# We pick a random validation set to sample nearest neighbors: here the first word of each
# topic, so that the neighbours can be checked against the topic.
valid_words = [t.split()[0] for t in TOPICS]
valid_examples = np.array([dictionary[w] for w in valid_words], np.int32)
valid_size = len(valid_examples)

init_rng = np.random.RandomState(1)
init_embeddings = init_rng.uniform(-1.0, 1.0, (vocabulary_size, embedding_size)).astype(np.float32)
init_nce_weights = np.clip(
    init_rng.normal(0.0, 1.0 / math.sqrt(embedding_size), (vocabulary_size, embedding_size)),
    -2.0 / math.sqrt(embedding_size),
    2.0 / math.sqrt(embedding_size),
).astype(np.float32)

graph = tf.Graph()

with graph.as_default():
    tf.set_random_seed(0)
    # Input data.
    train_inputs = tf.placeholder(tf.int32, shape=[batch_size])
    train_labels = tf.placeholder(tf.int32, shape=[batch_size, 1])
    valid_dataset = tf.constant(valid_examples, dtype=tf.int32)

    # Look up embeddings for inputs.
    embeddings = tf.Variable(init_embeddings)
    embed = tf.nn.embedding_lookup(embeddings, train_inputs)

    # Construct the variables for the NCE loss
    nce_weights = tf.Variable(init_nce_weights)
    nce_biases = tf.Variable(tf.zeros([vocabulary_size]))

    # Compute the average NCE loss for the batch.
    # tf.nce_loss automatically draws a new sample of the negative labels each
    # time we evaluate the loss.
    loss = tf.reduce_mean(
        tf.nn.nce_loss(
            weights=nce_weights,
            biases=nce_biases,
            labels=train_labels,
            inputs=embed,
            num_sampled=num_sampled,
            num_classes=vocabulary_size,
        )
    )

    # Construct the SGD optimizer using a learning rate of 1.0.
    optimizer = tf.train.GradientDescentOptimizer(1.0).minimize(loss)

    # Compute the cosine similarity between minibatch examples and all embeddings.
    norm = tf.sqrt(tf.reduce_sum(tf.square(embeddings), 1, keepdims=True))
    normalized_embeddings = embeddings / norm
    valid_embeddings = tf.nn.embedding_lookup(normalized_embeddings, valid_dataset)
    similarity = tf.matmul(valid_embeddings, normalized_embeddings, transpose_b=True)

    # Add variable initializer.
    init = tf.global_variables_initializer()

# Step 5: Begin training.
num_steps = 1201

with tf.Session(graph=graph) as session:
    # We must initialize all variables before we use them.
    init.run()
    print("Initialized")

    average_loss = 0
    for step in range(num_steps):
        batch_inputs, batch_labels = generate_batch(batch_size, num_skips, skip_window)
        feed_dict = {train_inputs: batch_inputs, train_labels: batch_labels}

        # We perform one update step by evaluating the optimizer op (including it
        # in the list of returned values for session.run()
        _, loss_val = session.run([optimizer, loss], feed_dict=feed_dict)
        average_loss += loss_val

        if step % 200 == 0:
            if step > 0:
                average_loss /= 200
            # The average loss is an estimate of the loss over the last 200 batches.
            print("Average loss at step ", step, ": ", average_loss)
            average_loss = 0

    sim = similarity.eval()
    same_topic = 0
    for i in range(valid_size):
        valid_word = reverse_dictionary[valid_examples[i]]
        top_k = 4  # number of nearest neighbors
        nearest = (-sim[i, :]).argsort()[1 : top_k + 1]
        log_str = "Nearest to %s:" % valid_word
        for k in range(top_k):
            close_word = reverse_dictionary[nearest[k]]
            log_str = "%s %s," % (log_str, close_word)
            same_topic += close_word in TOPICS[i].split()
        print(log_str)
    print("Neighbours on the same topic: %d of %d" % (same_topic, valid_size * top_k))
