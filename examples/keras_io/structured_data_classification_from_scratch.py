"""Structured data classification from scratch (keras-io example
`structured_data_classification_from_scratch`), in a backend-agnostic form.

On a synthetic table shaped like the heart-disease CSV (`_data.load_heart_like`, 1000 rows)
instead of the download, with dicts of numpy columns in place of the dataframe and `tf.data`
pipelines: each preprocessing layer adapts on its training column. Integer categories go through
`IntegerLookup` and numbers through `Normalization` inside the model; the string category `thal`
is indexed by a `StringLookup` before the model (string tensors exist only in TensorFlow) and
one-hot encoded by `CategoryEncoding` inside it. 20 epochs instead of 50.
"""

import numpy as np
from _data import load_heart_like

import keratron as keras
from keratron import layers

keras.utils.set_random_seed(1337)

dataframe = load_heart_like()
print("Shape:", (len(dataframe["target"]), len(dataframe)))

num_rows = len(dataframe["target"])
val_rows = np.random.RandomState(1337).permutation(num_rows)[: num_rows // 5]
is_val = np.zeros(num_rows, dtype=bool)
is_val[val_rows] = True
val_dataframe = {name: column[is_val] for name, column in dataframe.items()}
train_dataframe = {name: column[~is_val] for name, column in dataframe.items()}
print(
    f"Using {len(train_dataframe['target'])} samples for training "
    f"and {len(val_dataframe['target'])} for validation"
)

# The string feature, indexed outside the model
thal_lookup = layers.StringLookup(num_oov_indices=0)
thal_lookup.adapt(train_dataframe["thal"])
for frame in (train_dataframe, val_dataframe):
    frame["thal"] = keras.ops.convert_to_numpy(thal_lookup(frame["thal"])).astype("int64")


def dataframe_to_arrays(dataframe):
    dataframe = dict(dataframe)
    labels = dataframe.pop("target")
    features = {name: np.expand_dims(column, -1) for name, column in dataframe.items()}
    return features, labels


train_x, train_y = dataframe_to_arrays(train_dataframe)
val_x, val_y = dataframe_to_arrays(val_dataframe)


def encode_numerical_feature(feature, name, data):
    # Create a Normalization layer for our feature
    normalizer = layers.Normalization()

    # Learn the statistics of the data
    normalizer.adapt(data[name].astype("float32"))

    # Normalize the input feature
    encoded_feature = normalizer(feature)
    return encoded_feature


def encode_categorical_feature(feature, name, data):
    # Create a lookup layer which will turn integers into one-hot vectors
    lookup = layers.IntegerLookup(output_mode="one_hot")

    # Learn the set of possible values and assign them a fixed integer index
    lookup.adapt(data[name])

    # Turn the integer input into a one-hot vector
    encoded_feature = lookup(feature)
    return encoded_feature


# Categorical features encoded as integers
sex = keras.Input(shape=(1,), name="sex", dtype="int64")
cp = keras.Input(shape=(1,), name="cp", dtype="int64")
fbs = keras.Input(shape=(1,), name="fbs", dtype="int64")
restecg = keras.Input(shape=(1,), name="restecg", dtype="int64")
exang = keras.Input(shape=(1,), name="exang", dtype="int64")
ca = keras.Input(shape=(1,), name="ca", dtype="int64")

# Categorical feature encoded as string, indexed before the model
thal = keras.Input(shape=(1,), name="thal", dtype="int64")

# Numerical features
age = keras.Input(shape=(1,), name="age")
trestbps = keras.Input(shape=(1,), name="trestbps")
chol = keras.Input(shape=(1,), name="chol")
thalach = keras.Input(shape=(1,), name="thalach")
oldpeak = keras.Input(shape=(1,), name="oldpeak")
slope = keras.Input(shape=(1,), name="slope")

all_inputs = [
    sex,
    cp,
    fbs,
    restecg,
    exang,
    ca,
    thal,
    age,
    trestbps,
    chol,
    thalach,
    oldpeak,
    slope,
]

# Integer categorical features
sex_encoded = encode_categorical_feature(sex, "sex", train_x)
cp_encoded = encode_categorical_feature(cp, "cp", train_x)
fbs_encoded = encode_categorical_feature(fbs, "fbs", train_x)
restecg_encoded = encode_categorical_feature(restecg, "restecg", train_x)
exang_encoded = encode_categorical_feature(exang, "exang", train_x)
ca_encoded = encode_categorical_feature(ca, "ca", train_x)

# String categorical feature
thal_encoded = layers.CategoryEncoding(
    num_tokens=thal_lookup.vocabulary_size(), output_mode="one_hot"
)(thal)

# Numerical features
age_encoded = encode_numerical_feature(age, "age", train_x)
trestbps_encoded = encode_numerical_feature(trestbps, "trestbps", train_x)
chol_encoded = encode_numerical_feature(chol, "chol", train_x)
thalach_encoded = encode_numerical_feature(thalach, "thalach", train_x)
oldpeak_encoded = encode_numerical_feature(oldpeak, "oldpeak", train_x)
slope_encoded = encode_numerical_feature(slope, "slope", train_x)

all_features = layers.concatenate(
    [
        sex_encoded,
        cp_encoded,
        fbs_encoded,
        restecg_encoded,
        exang_encoded,
        slope_encoded,
        ca_encoded,
        thal_encoded,
        age_encoded,
        trestbps_encoded,
        chol_encoded,
        oldpeak_encoded,
        thalach_encoded,
    ]
)
x = layers.Dense(32, activation="relu")(all_features)
x = layers.Dropout(0.5)(x)
output = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(all_inputs, output)
model.compile("adam", "binary_crossentropy", metrics=["accuracy"])

history = model.fit(
    train_x, train_y, batch_size=32, epochs=20, validation_data=(val_x, val_y), verbose=0
)

sample = {
    "age": 60,
    "sex": 1,
    "cp": 1,
    "trestbps": 145,
    "chol": 233,
    "fbs": 1,
    "restecg": 2,
    "thalach": 150,
    "exang": 0,
    "oldpeak": 2.3,
    "slope": 3,
    "ca": 0,
    "thal": keras.ops.convert_to_numpy(thal_lookup(np.array(["fixed"])))[0],
}
input_dict = {name: np.array([[value]]) for name, value in sample.items()}
predictions = model.predict(input_dict, verbose=0)
print(
    f"This particular patient had a {100 * predictions[0][0]:.1f} "
    "percent probability of having a heart disease, as evaluated by our model."
)
print(f"val accuracy: {history.history['val_accuracy'][-1]:.4f}")
