from rest_framework.routers import DefaultRouter

from generation.api import GenerationJobViewSet, LabellingJobViewSet

router = DefaultRouter()
router.register("generation-jobs", GenerationJobViewSet, basename="generation-job")
router.register("labelling-jobs", LabellingJobViewSet, basename="labelling-job")
urlpatterns = router.urls
