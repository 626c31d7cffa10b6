"""transformers configuration of an exported Performer protein model
(written into every export folder by performer-export; needs the
performer_protein package installed)."""

from transformers import PretrainedConfig


class PerformerProteinConfig(PretrainedConfig):
    model_type = "performer_protein"

    def __init__(self, performer=None, **kwargs):
        self.performer = dict(performer or {})  # the model configuration (performer_protein.ModelConfig)
        super().__init__(**kwargs)
