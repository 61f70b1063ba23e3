"""The SageMaker backend: training jobs through the SageMaker Python SDK (sagemaker.core)."""
