"""Feature columns (`tf.feature_column`): describe how raw features feed a model, and
`DenseFeatures`, the layer that applies dense columns."""

from keratron.feature_column._fingerprint import (
    fingerprint,
    is_string_array,
    strings_to_fingerprints,
)
from keratron.feature_column.dense_features import DenseFeatures
from keratron.feature_column.feature_column import (
    BucketizedColumn,
    CategoricalColumn,
    DenseColumn,
    EmbeddingColumn,
    FeatureColumn,
    IdentityCategoricalColumn,
    IndicatorColumn,
    NumericColumn,
    VocabularyListCategoricalColumn,
    bucketized_column,
    categorical_column_with_identity,
    categorical_column_with_vocabulary_list,
    embedding_column,
    indicator_column,
    numeric_column,
)

__all__ = [
    "BucketizedColumn",
    "CategoricalColumn",
    "DenseColumn",
    "DenseFeatures",
    "EmbeddingColumn",
    "FeatureColumn",
    "IdentityCategoricalColumn",
    "IndicatorColumn",
    "NumericColumn",
    "VocabularyListCategoricalColumn",
    "bucketized_column",
    "categorical_column_with_identity",
    "categorical_column_with_vocabulary_list",
    "embedding_column",
    "fingerprint",
    "indicator_column",
    "is_string_array",
    "numeric_column",
    "strings_to_fingerprints",
]
